package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxBodyBytes bounds a request body: a prompt of a few hundred thousand words.
const maxBodyBytes = 8 << 20

type streamOptions struct {
	IncludeUsage         *bool `json:"include_usage"`
	ContinuousUsageStats *bool `json:"continuous_usage_stats"`
}

// request is what the two generation endpoints share once parsed.
type request struct {
	chat          bool
	model         string
	inputTokens   int
	maxTokens     int
	stream        bool
	usage         bool // stream_options.include_usage
	continuous    bool // stream_options.continuous_usage_stats
	requestIDHead string
}

type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "BadRequestError", fmt.Sprintf(format, a...)}
}

// parseRequest reads a /v1/completions or /v1/chat/completions body the way vLLM 0.11 validates it: the model
// must be the served one (NotFoundError, 404), stream_options only with stream, prompt plus max_tokens within
// the context length. Prompt tokens are counted as whitespace-separated words (a token ID list counts its IDs):
// the stand-in has no tokenizer, and the loadgen's synthetic prompts are N words for N tokens.
func (s *Server) parseRequest(r *http.Request, chat bool) (*request, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		return nil, badRequest("request body: %v", err)
	}
	var raw struct {
		Model               string          `json:"model"`
		Prompt              json.RawMessage `json:"prompt"`
		Messages            []chatInMessage `json:"messages"`
		MaxTokens           *int            `json:"max_tokens"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
		N                   *int            `json:"n"`
		Stream              bool            `json:"stream"`
		StreamOptions       *streamOptions  `json:"stream_options"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return nil, badRequest("%v", err)
	}
	q := &request{chat: chat, model: s.cfg.Model, stream: raw.Stream, requestIDHead: r.Header.Get("X-Request-Id")}
	if raw.Model != "" && raw.Model != s.cfg.Model {
		return nil, &apiError{http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", raw.Model)}
	}
	if raw.N != nil && *raw.N != 1 {
		return nil, badRequest("gpuaccept stand-in: n=%d is not simulated (one choice per request)", *raw.N)
	}
	if raw.StreamOptions != nil {
		if !raw.Stream {
			return nil, badRequest("Stream options can only be defined when `stream=True`.")
		}
		// StreamOptions.include_usage defaults to True in vLLM's protocol.py
		q.usage = raw.StreamOptions.IncludeUsage == nil || *raw.StreamOptions.IncludeUsage
		q.continuous = q.usage && raw.StreamOptions.ContinuousUsageStats != nil && *raw.StreamOptions.ContinuousUsageStats
	}
	if chat {
		if len(raw.Messages) == 0 {
			return nil, badRequest("messages: field required")
		}
		for _, m := range raw.Messages {
			n, err := m.words()
			if err != nil {
				return nil, badRequest("messages: %v", err)
			}
			q.inputTokens += n
		}
	} else {
		n, err := promptTokens(raw.Prompt)
		if err != nil {
			return nil, badRequest("prompt: %v", err)
		}
		q.inputTokens = n
	}
	maxTokens := raw.MaxTokens
	if chat && raw.MaxCompletionTokens != nil {
		maxTokens = raw.MaxCompletionTokens
	}
	switch {
	case maxTokens != nil:
		q.maxTokens = *maxTokens
	case chat: // ChatCompletionRequest: the rest of the context
		q.maxTokens = s.cfg.MaxModelLen - q.inputTokens
	default: // CompletionRequest.max_tokens defaults to 16
		q.maxTokens = 16
	}
	if q.maxTokens < 1 {
		return nil, badRequest("max_tokens must be at least 1, got %d.", q.maxTokens)
	}
	if q.inputTokens+q.maxTokens > s.cfg.MaxModelLen {
		return nil, badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens "+
			"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, q.inputTokens+q.maxTokens, q.inputTokens, q.maxTokens)
	}
	return q, nil
}

type chatInMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// words counts a message's content: a string, or a list of parts of which the text ones count.
func (m chatInMessage) words() (int, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return 0, nil
	}
	var text string
	if err := json.Unmarshal(m.Content, &text); err == nil {
		return len(strings.Fields(text)), nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return 0, errors.New("content: want a string or a list of parts")
	}
	n := 0
	for _, p := range parts {
		n += len(strings.Fields(p.Text))
	}
	return n, nil
}

// promptTokens counts a completion prompt: a string, a list of one string, or a list of token IDs.
func promptTokens(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, errors.New("field required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return len(strings.Fields(text)), nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 {
			return 0, fmt.Errorf("gpuaccept stand-in: %d prompts in one request are not simulated", len(texts))
		}
		return len(strings.Fields(texts[0])), nil
	}
	var ids []int64
	if err := json.Unmarshal(raw, &ids); err == nil {
		return len(ids), nil
	}
	return 0, errors.New("want a string, a list of one string or a list of token IDs")
}

// writeJSON writes v as starlette's JSONResponse does: compact, non-ASCII as is.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = newEncoder(w).Encode(v)
}

func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorResponse{Error: errorInfo{Message: e.msg, Type: e.typ, Param: jsonNull, Code: e.status}})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK) // vLLM: Response(status_code=200), no body
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	created := s.now().Unix()
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{{
		ID: s.cfg.Model, Object: "model", Created: created, OwnedBy: "vllm", Root: s.cfg.Model, Parent: jsonNull,
		MaxModelLen: s.cfg.MaxModelLen,
		Permission: []modelPermission{{
			ID: "modelperm-" + s.newID(), Object: "model_permission", Created: created, AllowSampling: true,
			AllowLogprobs: true, AllowView: true, Organization: "*", Group: jsonNull,
		}},
	}}})
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	running, waiting, capacity, st := s.eng.snapshot()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b bytes.Buffer
	writeMetrics(&b, s.cfg.Model, running, waiting, capacity, st)
	_, _ = w.Write(b.Bytes())
}
