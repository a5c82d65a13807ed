; Scala: tree-sitter-scala has a tags query in its sources but does not export it; these are its
; definitions that an ask can be inside. Annotations are part of the definition's node.
(class_definition name: (_) @name) @definition.class
(object_definition name: (_) @name) @definition.object
(trait_definition name: (_) @name) @definition.interface
(enum_definition name: (_) @name) @definition.enum
(function_definition name: (_) @name) @definition.function
(function_declaration name: (_) @name) @definition.function
(given_definition name: (_) @name) @definition.object
