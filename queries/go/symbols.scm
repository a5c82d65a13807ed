; Go. The grammar's tags query names functions, methods and types (`type_spec`). A method is
; named with its receiver's type, as `Cache.Refresh`.
(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @scope
        (pointer_type (type_identifier) @scope)
        (generic_type type: (type_identifier) @scope)
        (pointer_type (generic_type type: (type_identifier) @scope))
      ]))
  name: (field_identifier) @name) @definition.method
