; Swift. The grammar's tags query is not used: its method patterns capture the whole class as
; the definition of each method. class_declaration is also a struct, an enum, an actor or an
; extension (named by the type it extends).
(class_declaration name: (_) @name) @definition.class
(protocol_declaration name: (_) @name) @definition.interface
(function_declaration name: (_) @name) @definition.function
(protocol_function_declaration name: (_) @name) @definition.method
(init_declaration "init" @name) @definition.method
(deinit_declaration "deinit" @name) @definition.method
(subscript_declaration "subscript" @name) @definition.method
