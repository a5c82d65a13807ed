; JavaScript and JSX. The grammar's tags query names classes,
; functions, methods, and functions bound to a variable, a property or an object key; it leaves
; out constructors, and class fields that hold a function.
(method_definition name: (_) @name) @definition.method
(field_definition property: (_) @name value: [(arrow_function) (function_expression)]) @definition.method

; A decorated exported class starts at its decorator, before `export`.
(export_statement (decorator) declaration: (class_declaration name: (_) @name)) @definition.class
