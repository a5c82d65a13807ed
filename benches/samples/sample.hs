-- | Evaluation of simple arithmetic expressions with variables.
--
-- The parser is hand-written to avoid external dependencies; it handles
-- integers, identifiers, parentheses and the four basic operators.

data Expr
  = Num Integer
  | Var String
  | BinOp Op Expr Expr
  | Let String Expr Expr
  deriving (Show, Eq)

data Op = Add | Sub | Mul | Div
  deriving (Show, Eq, Enum, Bounded)

-- | Errors that can occur while evaluating.
data EvalError
  = UnboundVariable String
  | DivisionByZero
  | ParseFailure String
  deriving (Eq)

instance Show EvalError where
  show (UnboundVariable name) = "unbound variable: " ++ name
  show DivisionByZero = "division by zero"
  show (ParseFailure msg) = "parse error: " ++ msg

type Env = [(String, Integer)]

-- | Render an operator as its usual symbol.
opSymbol :: Op -> Char
opSymbol op = case op of
  Add -> '+'
  Sub -> '-'
  Mul -> '*'
  Div -> '/'

applyOp :: Op -> Integer -> Integer -> Either EvalError Integer
applyOp Add a b = Right (a + b)
applyOp Sub a b = Right (a - b)
applyOp Mul a b = Right (a * b)
applyOp Div _ 0 = Left DivisionByZero
applyOp Div a b = Right (a `div` b)

-- | Evaluate an expression in the given environment.
eval :: Env -> Expr -> Either EvalError Integer
eval _ (Num n) = Right n
eval env (Var name) =
  maybe (Left (UnboundVariable name)) Right (lookup name env)
eval env (BinOp op l r) = do
  a <- eval env l
  b <- eval env r
  applyOp op a b
eval env (Let name bound body) = do
  value <- eval env bound
  eval ((name, value) : env) body

-- | Pretty-print with the minimum number of parentheses.
pretty :: Expr -> String
pretty = go 0
  where
    go :: Int -> Expr -> String
    go _ (Num n)
      | n < 0 = "(" ++ show n ++ ")"
      | otherwise = show n
    go _ (Var v) = v
    go p (BinOp op l r) =
      let q = precedence op
          s = go q l ++ [' ', opSymbol op, ' '] ++ go (q + 1) r
       in if q < p then "(" ++ s ++ ")" else s
    go p (Let n b e) =
      let s = "let " ++ n ++ " = " ++ go 0 b ++ " in " ++ go 0 e
       in if p > 0 then "(" ++ s ++ ")" else s

    precedence Add = 1
    precedence Sub = 1
    precedence _ = 2

-- Tokenizer ---------------------------------------------------------------

data Token = TNum Integer | TIdent String | TSym Char
  deriving (Show, Eq)

tokenize :: String -> Either EvalError [Token]
tokenize [] = Right []
tokenize (c : cs)
  | c `elem` " \t\n" = tokenize cs
  | c `elem` "+-*/()=" = (TSym c :) <$> tokenize cs
  | c >= '0' && c <= '9' =
      let (digits, rest) = span (\x -> x >= '0' && x <= '9') (c : cs)
       in (TNum (read digits) :) <$> tokenize rest
  | c >= 'a' && c <= 'z' =
      let (ident, rest) = span (`elem` ['a' .. 'z'] ++ ['0' .. '9'] ++ "_") (c : cs)
       in (TIdent ident :) <$> tokenize rest
  | otherwise = Left (ParseFailure ("unexpected character " ++ show c))

-- Parser (recursive descent) ----------------------------------------------

parseExpr :: [Token] -> Either EvalError (Expr, [Token])
parseExpr (TIdent "let" : TIdent n : TSym '=' : ts) = do
  (bound, rest) <- parseExpr ts
  case rest of
    TIdent "in" : rest' -> do
      (body, rest'') <- parseExpr rest'
      pure (Let n bound body, rest'')
    _ -> Left (ParseFailure "expected 'in'")
parseExpr ts = parseTerm ts >>= uncurry (chain [('+', Add), ('-', Sub)] parseTerm)

parseTerm :: [Token] -> Either EvalError (Expr, [Token])
parseTerm ts = parseAtom ts >>= uncurry (chain [('*', Mul), ('/', Div)] parseAtom)

chain ::
  [(Char, Op)] ->
  ([Token] -> Either EvalError (Expr, [Token])) ->
  Expr ->
  [Token] ->
  Either EvalError (Expr, [Token])
chain ops next lhs (TSym s : ts)
  | Just op <- lookup s ops = do
      (rhs, rest) <- next ts
      chain ops next (BinOp op lhs rhs) rest
chain _ _ lhs ts = Right (lhs, ts)

parseAtom :: [Token] -> Either EvalError (Expr, [Token])
parseAtom (TNum n : ts) = Right (Num n, ts)
parseAtom (TIdent v : ts) = Right (Var v, ts)
parseAtom (TSym '(' : ts) = do
  (e, rest) <- parseExpr ts
  case rest of
    TSym ')' : rest' -> Right (e, rest')
    _ -> Left (ParseFailure "missing closing parenthesis")
parseAtom ts = Left (ParseFailure ("unexpected input: " ++ take 20 (show ts)))

-- | Parse and evaluate a complete program.
run :: Env -> String -> Either EvalError Integer
run env src = do
  tokens <- tokenize src
  (expr, rest) <- parseExpr tokens
  if null rest
    then eval env expr
    else Left (ParseFailure "trailing input")
