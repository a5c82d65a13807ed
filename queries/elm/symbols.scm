; Elm. The grammar's tags query names functions and values, custom types and the module.
(type_alias_declaration name: (upper_case_identifier) @name) @definition.type

; `refresh : Cache -> Cache` belongs to the definition below it.
(type_annotation) @attached
