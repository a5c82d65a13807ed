; C#. The grammar's tags query names classes, interfaces, methods and namespaces with a simple
; name; attributes are part of the declaration's node.
(namespace_declaration name: (_) @name) @definition.namespace
(struct_declaration name: (identifier) @name) @definition.struct
(record_declaration name: (identifier) @name) @definition.class
(enum_declaration name: (identifier) @name) @definition.enum
(constructor_declaration name: (identifier) @name) @definition.method
(local_function_statement name: (identifier) @name) @definition.function
