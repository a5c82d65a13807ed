; Python. The grammar's tags query names classes and functions. A decorated definition starts at
; its first decorator.
(decorated_definition definition: (function_definition name: (identifier) @name)) @definition.function
(decorated_definition definition: (class_definition name: (identifier) @name)) @definition.class
