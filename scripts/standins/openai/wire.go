package openai

import "encoding/json"

// The JSON of vLLM's OpenAI-compatible server, field for field and in pydantic's declaration order (encoding/json
// keeps a struct's order). Sources, vllm-project/vllm at the 0.11 line:
//   - vllm/entrypoints/openai/protocol.py: CompletionStreamResponse (id, object "text_completion", created,
//     model, choices, usage), CompletionResponseStreamChoice (index, text, logprobs, finish_reason, stop_reason,
//     prompt_token_ids, token_ids), ChatCompletionStreamResponse (..., choices, usage, prompt_token_ids),
//     ChatCompletionResponseStreamChoice (index, delta, logprobs, finish_reason, stop_reason, token_ids),
//     UsageInfo (prompt_tokens, total_tokens, completion_tokens, prompt_tokens_details), ErrorResponse
//     {"error": ErrorInfo (message, type, param, code = the HTTP status)}, ModelCard, ModelPermission.
//   - vllm/entrypoints/openai/serving_completion.py: every completion chunk is model_dump_json(exclude_unset=False)
//     (all fields, None as null); the usage chunk model_dump_json(exclude_unset=False, exclude_none=True), with
//     choices []; then "data: [DONE]".
//   - vllm/entrypoints/openai/serving_chat.py: chat chunks are model_dump_json(exclude_unset=True): the first
//     chunk carries delta {"role":"assistant","content":""} and prompt_token_ids; token chunks delta {"content"}
//     and token_ids; the last adds finish_reason and stop_reason; the usage chunk exclude_none as above.
//   - A genuine 0.11 completion chunk (vllm-project/vllm pull request 27561, after its fix, which this follows;
//     0.11.0 itself put the prompt's token IDs in the first chunk):
//     data: {"id":"cmpl-d1eb8177…","object":"text_completion","created":1761553358,"model":"/home/jovyan/qwen3-8b",
//     "choices":[{"index":0,"text":" Sir","logprobs":null,"finish_reason":null,"stop_reason":null,
//     "prompt_token_ids":null,"token_ids":null}],"usage":null}
//   - Non-streamed responses go through starlette's JSONResponse of model_dump() (every field, compact).
// The stand-in has no logprobs, token IDs, tools or reasoning: those fields are always null (or absent where
// vLLM leaves them unset).

// jsonNull is a field pydantic writes as null because it was set to None explicitly (exclude_unset keeps it).
var jsonNull = json.RawMessage("null")

type usageInfo struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// usageFull is UsageInfo with every field dumped (exclude_none=False).
type usageFull struct {
	usageInfo
	PromptTokensDetails json.RawMessage `json:"prompt_tokens_details"`
}

func newUsage(prompt, completion int) usageInfo {
	return usageInfo{PromptTokens: prompt, TotalTokens: prompt + completion, CompletionTokens: completion}
}

type completionStreamChoice struct {
	Index          int             `json:"index"`
	Text           string          `json:"text"`
	Logprobs       json.RawMessage `json:"logprobs"`
	FinishReason   *string         `json:"finish_reason"`
	StopReason     json.RawMessage `json:"stop_reason"`
	PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
	TokenIDs       json.RawMessage `json:"token_ids"`
}

type completionChunk struct {
	ID      string                   `json:"id"`
	Object  string                   `json:"object"`
	Created int64                    `json:"created"`
	Model   string                   `json:"model"`
	Choices []completionStreamChoice `json:"choices"`
	Usage   *usageFull               `json:"usage"`
}

// usageChunk is the last chunk before [DONE] when stream_options.include_usage, for both endpoints.
type usageChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []struct{} `json:"choices"`
	Usage   usageInfo  `json:"usage"`
}

type chatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type chatStreamChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
	TokenIDs     json.RawMessage `json:"token_ids,omitempty"`
}

type chatChunk struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []chatStreamChoice `json:"choices"`
	Usage          *usageInfo         `json:"usage,omitempty"`
	PromptTokenIDs json.RawMessage    `json:"prompt_token_ids,omitempty"`
}

type completionChoice struct {
	Index          int             `json:"index"`
	Text           string          `json:"text"`
	Logprobs       json.RawMessage `json:"logprobs"`
	FinishReason   string          `json:"finish_reason"`
	StopReason     json.RawMessage `json:"stop_reason"`
	TokenIDs       json.RawMessage `json:"token_ids"`
	PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
	PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	ServiceTier       json.RawMessage    `json:"service_tier"`
	SystemFingerprint json.RawMessage    `json:"system_fingerprint"`
	Usage             usageFull          `json:"usage"`
	KVTransferParams  json.RawMessage    `json:"kv_transfer_params"`
}

// chatMessage is ChatMessage of 0.11's protocol.py as model_dump() writes it. Unlike the streamed chunks, no
// genuine non-streamed chat body was at hand to hold this against; the loadgen streams.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	Refusal          json.RawMessage `json:"refusal"`
	Annotations      json.RawMessage `json:"annotations"`
	Audio            json.RawMessage `json:"audio"`
	FunctionCall     json.RawMessage `json:"function_call"`
	ToolCalls        []struct{}      `json:"tool_calls"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      chatMessage     `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
	TokenIDs     json.RawMessage `json:"token_ids"`
}

type chatResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	Choices           []chatChoice    `json:"choices"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	Usage             usageFull       `json:"usage"`
	PromptLogprobs    json.RawMessage `json:"prompt_logprobs"`
	PromptTokenIDs    json.RawMessage `json:"prompt_token_ids"`
	KVTransferParams  json.RawMessage `json:"kv_transfer_params"`
}

type errorInfo struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   json.RawMessage `json:"param"`
	Code    int             `json:"code"`
}

type errorResponse struct {
	Error errorInfo `json:"error"`
}

type modelPermission struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	Created            int64           `json:"created"`
	AllowCreateEngine  bool            `json:"allow_create_engine"`
	AllowSampling      bool            `json:"allow_sampling"`
	AllowLogprobs      bool            `json:"allow_logprobs"`
	AllowSearchIndices bool            `json:"allow_search_indices"`
	AllowView          bool            `json:"allow_view"`
	AllowFineTuning    bool            `json:"allow_fine_tuning"`
	Organization       string          `json:"organization"`
	Group              json.RawMessage `json:"group"`
	IsBlocking         bool            `json:"is_blocking"`
}

type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      json.RawMessage   `json:"parent"`
	MaxModelLen int               `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}
