{- A headless counter with undo history, run with `Platform.worker`.

   The file has no module header, so Elm treats it as `module Main
   exposing (..)`. Only the default imports (Basics, List, Maybe,
   String, Platform, Cmd, Sub) are used.
-}

-- MODEL


type alias Model =
    { count : Int
    , step : Int
    , history : List Change
    , limit : Maybe Int
    }


type alias Change =
    { from : Int
    , to : Int
    , reason : String
    }


{-| Initial state: zero, step one, limited to plus or minus one hundred.
-}
initialModel : Model
initialModel =
    { count = 0
    , step = 1
    , history = []
    , limit = Just 100
    }



-- UPDATE


type Msg
    = Increment
    | Decrement
    | Reset
    | SetStep String
    | Undo


clampTo : Maybe Int -> Int -> Int
clampTo limit n =
    case limit of
        Just max ->
            clamp (negate max) max n

        Nothing ->
            n


record : String -> Int -> Model -> Model
record reason next model =
    if next == model.count then
        model

    else
        { model
            | count = next
            , history = { from = model.count, to = next, reason = reason } :: List.take 19 model.history
        }


update : Msg -> Model -> ( Model, Cmd Msg )
update msg model =
    case msg of
        Increment ->
            ( record "increment" (clampTo model.limit (model.count + model.step)) model, Cmd.none )

        Decrement ->
            ( record "decrement" (clampTo model.limit (model.count - model.step)) model, Cmd.none )

        Reset ->
            ( record "reset" 0 model, Cmd.none )

        SetStep raw ->
            case String.toInt (String.trim raw) of
                Just n ->
                    if n > 0 then
                        ( { model | step = n }, Cmd.none )

                    else
                        ( model, Cmd.none )

                Nothing ->
                    ( model, Cmd.none )

        Undo ->
            case model.history of
                last :: rest ->
                    ( { model | count = last.from, history = rest }, Cmd.none )

                [] ->
                    ( model, Cmd.none )



-- RENDERING


{-| Describe the model as plain text, one line per history entry.
-}
render : Model -> String
render model =
    String.join "\n"
        (("count = " ++ String.fromInt model.count)
            :: ("step = " ++ String.fromInt model.step)
            :: renderLimit model.limit
            :: List.map describe model.history
        )


renderLimit : Maybe Int -> String
renderLimit limit =
    case limit of
        Just n ->
            "values are limited to \u{00B1}" ++ String.fromInt n

        Nothing ->
            "no limit"


describe : Change -> String
describe change =
    let
        arrow =
            if change.to > change.from then
                " \u{2191} "

            else
                " \u{2193} "
    in
    change.reason
        ++ ": "
        ++ String.fromInt change.from
        ++ arrow
        ++ String.fromInt change.to


parseCommand : String -> Maybe Msg
parseCommand line =
    case String.words (String.toLower line) of
        [ "inc" ] ->
            Just Increment

        [ "dec" ] ->
            Just Decrement

        [ "reset" ] ->
            Just Reset

        [ "undo" ] ->
            Just Undo

        [ "step", n ] ->
            Just (SetStep n)

        _ ->
            Nothing


{-| Replay a script of commands, ignoring lines that do not parse.
-}
replay : List String -> Model -> Model
replay lines model =
    List.foldl
        (\line acc ->
            parseCommand line
                |> Maybe.map (\msg -> Tuple.first (update msg acc))
                |> Maybe.withDefault acc
        )
        model
        lines


main : Program () Model Msg
main =
    Platform.worker
        { init = \_ -> ( replay [ "step 5", "inc", "inc", "undo" ] initialModel, Cmd.none )
        , update = update
        , subscriptions = \_ -> Sub.none
        }
