package events

// FastTranscript builds the transcript of a turn after steps four-tool
// steps, for the external tests' benchmarks.
var FastTranscript = fastTranscript
