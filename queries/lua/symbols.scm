; Lua. The grammar's tags query is not used: its pattern for a function in a table constructor
; captures the whole table as the definition, named by its first function. Names are as
; written: `M.refresh`, `Cache:refresh`.
(function_declaration name: (_) @name) @definition.function
(variable_declaration
  (assignment_statement
    (variable_list . name: (_) @name)
    (expression_list . value: (function_definition)))) @definition.function
(assignment_statement
  (variable_list . name: (_) @name)
  (expression_list . value: (function_definition))) @definition.function
(field name: (_) @name value: (function_definition)) @definition.function
