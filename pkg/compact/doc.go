// Package compact decides when and how the context a model reads is
// compacted, so that a turn or a session of any length keeps within the
// model's window. It is NATS-free: pkg/worker calls it before every model
// call, in-process or in the turn service alike.
//
// # The projection
//
// The originals are never deleted. A transcript is a sequence of
// messages at positions 0..N-1; the active compaction (an
// events.Compaction) replaces positions [0, To) by its own messages, and
// the model reads
//
//	projection = compaction.Messages ++ originals[To:N]
//
// (Project). A new compaction covers a longer prefix [0, To') and is
// computed from the previous projection of that span, so it can be
// undone (drop it) and a later turn on a larger model can read more.
// A provider-native compaction (Policy "native:<provider>", no messages:
// the provider's block begins the original at To, llm.NativeCompactionData)
// applies only while the model called is of that provider's origin
// (llm.Origin); a fallback to another provider reads the projection of
// its Fallback (the compaction of the tiers it was made over, else the
// originals) again. A provider's block is read only at the start of the
// active provider-native compaction, by its origin. The tiers never
// compact from a provider-native compaction, and leave its blocks out of
// theirs. Policy.Trigger is the threshold a provider that
// compacts natively is asked to compact at.
//
// # When
//
// The room of a model call is the model's context window − its max
// output tokens (the call's max_tokens, else the model's limit) −
// Reserve (default llm.DefaultReserve: 2% of the window, at least 1,024
// tokens). Before each call Plan estimates the request (Estimator, by
// default llm.EstimateMessages: a quarter of the bytes of text, fixed
// counts for framing and media; the system prompt and
// tool definitions are Input.Overhead; with Input.Reported, the
// provider's count of an earlier request whose projection this one
// extends, that count plus the estimate of what was added, every
// estimate scaled to the count) and compacts when the estimate is
// above Threshold × room (default 0.8), down to Target × room (default
// 0.5) if it can. A model of unknown window is not compacted before its
// calls. After the provider refused a call as too long (Input.Force) the
// room is at most ForcedShare (0.75) of the refused request's estimate,
// whatever the model's window.
//
// # Units that never split, and what is kept
//
// The projection is cut into units: a user message, or an assistant
// message with the tool messages that follow it (the results of its
// calls, parallel ones included). A compaction ends at a unit start,
// never covers the last unit, and keeps these units as they are (after
// its summary, in order): a unit with a pinned message
// (events.Message.Pinned), with a call Input.Keep names (pending, paused
// for approval, started early, running), or with an orphaned call (a
// tool_use without its result, a result without its tool_use). So a call
// that never finishes is never compacted away, and the compactions after
// it still cover everything else. The system prompt is not in the
// transcript: it is sent as it is.
//
// The span a compaction covers ends at the latest unit start that leaves
// at least KeepRecent tokens after it (default a quarter of the room);
// when the tiers cannot make that fit the room, at the start of the last
// unit.
//
// # Tiers, cheapest first
//
// On the span, each tier applies to everything the earlier ones did,
// and Plan stops at the first after which the estimate is at most Target
// × room:
//
//   - offload: a tool result of more than OffloadAbove bytes of text
//     (default 8192), or with image or file parts, becomes its first
//     Preview bytes (default 1024) and a note that the worker's
//     read_result tool (ReadResultTool) returns the rest from the
//     originals.
//   - clear: every tool result becomes a note naming read_result, and
//     thinking parts are left out.
//   - summary: the units that are not kept are summarized by a model
//     call (Summarizer; the turn's model or SummarizerModel) into one
//     user message; the kept units follow it. The summarizer reads the
//     offloaded span, as text; when that is larger than its own window
//     (− 2 × SummaryMaxTokens − Reserve − its prompt) it is folded: cut
//     into chunks that fit, each call reading the summary so far and the
//     next chunk.
//
// Policy names the tiers applied, comma-joined. A context that the last
// tier leaves above the room (a kept message or the last unit alone is
// larger) is an *OverflowError naming the largest message, returned
// before any provider call; so is a forced compaction that frees
// nothing.
//
// # The prompt cache
//
// Providers cache a request's prefix. A compaction rewrites the whole
// span at once and the projection's prefix stays the same bytes until
// the next compaction (a tier applied to an already offloaded or cleared
// result gives the same bytes), and that next compaction comes only once
// the context has grown from Target to Threshold of the room again (with
// the defaults, 30% of the room): the cache breaks once per compaction,
// never once per step.
package compact
