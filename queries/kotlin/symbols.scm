; Kotlin: tree-sitter-kotlin-ng ships no tags query. Interfaces and enum classes are
; class_declaration too; annotations are part of the declaration's node.
(class_declaration name: (identifier) @name) @definition.class
(object_declaration name: (identifier) @name) @definition.object
(companion_object name: (identifier) @name) @definition.object
(function_declaration name: (identifier) @name) @definition.function
(secondary_constructor "constructor" @name) @definition.method
