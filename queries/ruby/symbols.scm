; Ruby. The grammar's tags query names methods, singleton methods, classes and modules; nothing to
; add.
