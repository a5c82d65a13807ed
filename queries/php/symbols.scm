; PHP. The grammar's tags query names namespaces, interfaces, traits, classes, functions and
; methods; attributes are part of the declaration's node.
(enum_declaration name: (name) @name) @definition.enum
