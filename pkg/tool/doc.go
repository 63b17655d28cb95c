// Package tool defines the Tool interface of docs/architecture.md#the-turn-loop and the ways to
// build, check and look up tools. It has no NATS and no model SDK: the worker
// runs tools in-process, and toolexec hosts the same tools behind a queue.
//
// # Tools
//
// A Tool has a name (^[a-zA-Z0-9_-]{1,64}$), a description and an input JSON
// Schema, which together are the definition sent to the model (Definition,
// docs/protocol.md §4), and Execute, which runs it with the model's JSON input and
// returns the text the model reads. Optional interfaces add what executors
// need: Timeouter (WithTimeout), Versioner (WithVersion), Eagerer
// (WithReadOnly, WithIdempotent, WithEager), CallCanceller and
// InputValidator. TimeoutOf, VersionOf, EagerOf and CatalogEntry read
// them (the catalog value of docs/protocol.md §6).
//
// # Calls that start while the model streams
//
// The worker starts a call as soon as its block of the model's stream
// stopped, before the response is complete, when the tool is an Eagerer
// that says so: WithReadOnly (the call changes nothing) and
// WithIdempotent (a call made again with the same input changes nothing
// more) imply it, WithEager decides over them. A call started early runs
// for nothing when the response then fails, or the model call is made
// again and does not ask for the call again; it is cancelled then, and
// its result dropped. A tool with effects a repeated or needless call
// would do harm with must not start early, which is why a tool that says
// nothing does not (docs/architecture.md, "Calls that start while the
// model streams").
//
// # Typed tools
//
// New is the Go counterpart of the Rust tool macro: it turns a function taking
// a context and an arguments struct into a Tool.
//
//	type WeatherArgs struct {
//		City string `json:"city" description:"City name, e.g. Tokyo"`
//		Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit"`
//	}
//	weather, err := tool.New("get_weather", "Current weather for a city.",
//		func(ctx context.Context, a WeatherArgs) (Report, error) { ... })
//
// The input schema is generated from the arguments type by
// invopop/jsonschema, fully inline: no $ref, $defs, $schema or $id, because
// model APIs want one self-contained object schema. Struct tags shape it:
//
//   - json: property names; a field is required unless it has omitempty or
//     omitzero (or is tagged `jsonschema:"required"` anyway).
//   - jsonschema: keywords, e.g. `jsonschema:"description=...,enum=a,enum=b,
//     minimum=1,maxLength=10,format=email,nullable"`.
//   - description: a plain description tag, used when the jsonschema tag has
//     none; unlike there, commas need no escaping.
//
// Nested structs, slices, maps, pointers and time.Time are described inline;
// objects reject unknown properties. Recursive types cannot be inlined: New
// reports ErrInvalidSchema for them, and WithSchema supplies a schema by
// hand. SchemaFor shows the schema of a type.
//
// # Invalid arguments
//
// The schema is compiled once (santhosh-tekuri/jsonschema, draft 2020-12,
// formats asserted). Execute validates the input before decoding it; input
// that is not JSON, does not match the schema, or does not fit the Go type
// (1.5 for an int) is an *InvalidArgumentError, matching ErrInvalidArgument,
// and the function is not called. Its message names every offending field
// and what was expected, e.g.
//
//	invalid arguments for tool "get_weather": field "city" is required; field "unit" must be one of "celsius", "fahrenheit"
//
// so the caller can hand it back to the model as an error result and the
// model can correct the call. Empty input counts as {} (streams send a call
// without arguments that way). A function may return an
// *InvalidArgumentError itself for checks a schema cannot express.
//
// # Results and errors
//
// A string result is returned as is, a []byte as a string, anything else as
// JSON. An error from the function comes back as an *ExecutionError matching
// ErrExecutionFailed and unwrapping to the function's error; a panic is
// recovered into an *ExecutionError matching ErrPanicked. The worker turns
// both into error results for the model rather than failing the turn.
//
// A result of type Content ([]events.Part: text, image and file parts)
// shows the model images or files: the tool is a ContentTool, whose
// ExecuteContent returns the parts (checked with
// events.ValidateResultParts) and Execute their text. Executors run every
// tool through ExecuteContent, the function, and put the parts in the
// transcript's tool_result.
//
// # Raw tools
//
// NewFunc builds a tool from a function over the raw JSON input and a schema
// given as JSON, for tools without a Go arguments type; the input is still
// validated first. NewValidator compiles a schema alone, for executors that
// check calls against a catalog entry; Validate checks an input against any
// Tool's schema.
//
// # Registry
//
// Registry maps names to tools for the worker and toolexec. Register refuses
// invalid names and duplicates, Get looks a tool up, List and Names are
// sorted, and Definitions selects the definitions for a turn request's tool
// list, where "*" means every tool and unknown names are an error. A
// Registry is safe for concurrent use; its zero value is empty and usable.
package tool
