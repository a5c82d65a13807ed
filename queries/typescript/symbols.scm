; TypeScript and TSX, after the JavaScript tags query (as the grammar's own configuration reads
; them) and the grammar's own, which adds interfaces, abstract classes, `module` blocks and
; signatures. As for JavaScript: constructors, class fields that hold a function, and a
; decorated exported class from its decorator.
(method_definition name: (_) @name) @definition.method
(public_field_definition
  name: (_) @name value: [(arrow_function) (function_expression)]) @definition.method
(export_statement (decorator) declaration: (class_declaration name: (_) @name)) @definition.class
(export_statement
  (decorator) declaration: (abstract_class_declaration name: (_) @name)) @definition.class
(internal_module name: (_) @name) @definition.namespace
(enum_declaration name: (identifier) @name) @definition.enum
(type_alias_declaration name: (type_identifier) @name) @definition.type

; Decorators of class members are the members' siblings in this grammar.
(decorator) @attached
