; Haskell: tree-sitter-haskell ships no tags query. Each equation of a function is its own
; `function` node; definitions in a `where` are nested in it.
(function name: (_) @name) @definition.function
(bind name: (_) @name) @definition.function
(data_type name: (_) @name) @definition.type
(newtype name: (_) @name) @definition.type
(type_family name: (_) @name) @definition.type
(class name: (_) @name) @definition.class
(instance name: (_) @name) @definition.impl

; `refresh :: Cache -> Cache` belongs to the equation below it.
(signature) @attached

; A class method is only its signature.
(class_declarations (signature name: (_) @name) @definition.method)
