package openairesponses

import "encoding/json"

// Signatures are opaque to the rest of llmworker; this adapter packs what
// the Responses API needs back into them as JSON tagged with a "t" so that
// a signature of another provider is never mistaken for one of ours.
const (
	sigReasoning    = "openai.reasoning"
	sigFunctionCall = "openai.function_call"
	sigCompaction   = "openai.compaction"
)

// reasoningSig is the signature of a thinking block: the reasoning item's
// id, its encrypted content and its summary parts, everything a stateless
// request (store false) must send back.
type reasoningSig struct {
	T                string   `json:"t"`
	ID               string   `json:"id"`
	EncryptedContent string   `json:"encrypted_content,omitempty"`
	Summary          []string `json:"summary,omitempty"`
}

// callSig is the signature of a tool_use block: the function_call item id.
type callSig struct {
	T  string `json:"t"`
	ID string `json:"id"`
}

func marshalSig(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func parseReasoningSig(s string) (reasoningSig, bool) {
	var r reasoningSig
	if len(s) == 0 || s[0] != '{' || json.Unmarshal([]byte(s), &r) != nil || r.T != sigReasoning || r.ID == "" {
		return reasoningSig{}, false
	}
	return r, true
}

func parseCallSig(s string) (callSig, bool) {
	var c callSig
	if len(s) == 0 || s[0] != '{' || json.Unmarshal([]byte(s), &c) != nil || c.T != sigFunctionCall || c.ID == "" {
		return callSig{}, false
	}
	return c, true
}

// compactionSig is the provider data of a compaction item
// (llm.NativeCompactionSignature): its id and encrypted content, which
// the next request sends back as a compaction input item.
type compactionSig struct {
	T                string `json:"t"`
	ID               string `json:"id,omitempty"`
	EncryptedContent string `json:"encrypted_content"`
}

func parseCompactionSig(s string) (compactionSig, bool) {
	var c compactionSig
	if len(s) == 0 || s[0] != '{' || json.Unmarshal([]byte(s), &c) != nil || c.T != sigCompaction || c.EncryptedContent == "" {
		return compactionSig{}, false
	}
	return c, true
}
