package gc

// AnswerConforms says how an answer is not what the OpenAPI document describes: the examples'
// stand-in for gc's API (package gc_test) is checked with it.
var AnswerConforms = answerConforms
