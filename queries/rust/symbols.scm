; Rust. The grammar's tags query names structs, enums, unions, type aliases, functions, methods,
; traits, modules and macros, but an `impl` block only as a reference: here it is a definition,
; named by its type, so that a method is `Cache.refresh`.
(impl_item type: (type_identifier) @name) @definition.impl
(impl_item type: (generic_type type: (type_identifier) @name)) @definition.impl
(impl_item type: (scoped_type_identifier name: (type_identifier) @name)) @definition.impl
(impl_item
  type: (generic_type type: (scoped_type_identifier name: (type_identifier) @name))) @definition.impl

; `#[test]`, `#[derive(…)]`: outer attributes belong to the item below them.
(attribute_item) @attached

; A trait's method without a body (`fn load(&self) -> Vec<u8>;`).
(function_signature_item name: (identifier) @name) @definition.method
