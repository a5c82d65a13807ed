; C++. As for C, the grammar's tags query names a function by its declarator: here the whole
; definition, named as written (`refresh`, `Cache::refresh`, `~Cache`, `operator==`). A template
; starts at its `template <…>`; a namespace is a definition too.
(function_definition
  declarator: (function_declarator declarator: (_) @name)) @definition.function
(function_definition
  declarator: (pointer_declarator
    declarator: (function_declarator declarator: (_) @name))) @definition.function
(function_definition
  declarator: (reference_declarator
    (function_declarator declarator: (_) @name))) @definition.function
(template_declaration
  (function_definition
    declarator: (function_declarator declarator: (_) @name))) @definition.function
(template_declaration (class_specifier name: (_) @name)) @definition.class
(template_declaration (struct_specifier name: (_) @name)) @definition.class
(namespace_definition name: (_) @name) @definition.namespace
