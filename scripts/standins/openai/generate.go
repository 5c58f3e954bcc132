package openai

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"
)

// vocabulary is the text the stand-in "generates": token k is vocabulary[k%len], each with its leading space, as
// a BPE tokenizer's word tokens are.
var vocabulary = []string{" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", " and",
	" runs", " far", " into", " green", " hills", " again"}

func tokenText(k int) string { return vocabulary[k%len(vocabulary)] }

// generation is one request's life: queue, prefill, decode. Timings (all from the moment the request was
// accepted): it waits for a decode slot (queue), then prefill takes inputTokens / prefill_tokens_per_s, which
// ends with the first token; every further token comes token_delay after the one before went out (the delay
// read afresh per token, so an override slows requests in flight). TTFT = queue + prefill; E2EL = TTFT +
// (n-1) × delay, plus what writing the chunks costs.
type generation struct {
	s         *Server
	q         *request
	id        string
	created   int64
	w         http.ResponseWriter
	rc        *http.ResponseController
	errKind   string
	errAfter  int // tokens sent before a failing stream breaks off
	generated int
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) { s.generate(w, r, false) }

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) }

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	q, apiErr := s.parseRequest(r, chat)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	g := &generation{s: s, q: q, created: s.now().Unix(), w: w, rc: http.NewResponseController(w)}
	// vLLM: request_id = f"cmpl-{X-Request-Id or random_uuid()}" (chatcmpl- for chat)
	id := q.requestIDHead
	if id == "" {
		id = s.newID()
	}
	g.id = "cmpl-" + id
	if chat {
		g.id = "chatcmpl-" + id
	}
	g.errKind, g.errAfter = s.eng.draw(q.maxTokens)
	if g.errKind == ErrorHTTP {
		writeError(w, &apiError{http.StatusInternalServerError, "InternalServerError",
			"gpuaccept stand-in: simulated engine error (--error-rate)"})
		return
	}
	ctx := r.Context()
	if q.stream {
		// starlette's StreamingResponse sends the headers before the generator runs: before the queue
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_ = g.rc.Flush()
	}
	t0 := time.Now()
	release, err := s.eng.admit(ctx)
	if err != nil {
		s.eng.aborted(q.inputTokens, 0)
		return
	}
	defer release()
	admitted := time.Now()
	prefill := time.Duration(float64(q.inputTokens) / s.eng.tunables().PrefillTokensPerS * float64(time.Second))
	next := admitted.Add(prefill)
	var text strings.Builder
	for k := 0; k < q.maxTokens; k++ {
		if k > 0 {
			// from when the previous chunk went out: a host too slow to keep the pace (a throttled CPU)
			// falls behind as a real server does, rather than catching up in bursts
			next = time.Now().Add(s.eng.tunables().TokenDelay)
		}
		if !sleepUntil(ctx, next) {
			s.eng.aborted(q.inputTokens, g.generated)
			return
		}
		if g.errKind != "" && k == g.errAfter {
			g.fail()
			return
		}
		g.generated++
		if q.stream {
			if !g.sendToken(k, k == q.maxTokens-1) {
				s.eng.aborted(q.inputTokens, g.generated)
				return
			}
		} else {
			text.WriteString(tokenText(k))
		}
	}
	end := time.Now()
	firstToken := admitted.Add(prefill)
	s.eng.finished(q.inputTokens, g.generated, admitted.Sub(t0), prefill, firstToken.Sub(t0),
		end.Sub(firstToken), end.Sub(t0))
	if q.stream {
		g.finishStream()
		return
	}
	g.respond(text.String())
}

// fail breaks the request off as --error-kind says. A stream error ends the body cleanly but without
// "data: [DONE]"; an abort closes the connection without ending the chunked body (net/http's ErrAbortHandler),
// which a client reads as an unexpected EOF. A non-streamed request has no stream to cut: both close the
// connection without an answer.
func (g *generation) fail() {
	g.s.eng.aborted(g.q.inputTokens, g.generated)
	if g.errKind == ErrorStream && g.q.stream {
		return
	}
	panic(http.ErrAbortHandler)
}

// sendToken writes token k's chunk; false when the client is gone.
func (g *generation) sendToken(k int, last bool) bool {
	var usage *usageInfo
	if g.q.continuous {
		u := newUsage(g.q.inputTokens, g.generated)
		usage = &u
	}
	var finish *string
	if last {
		finish = new("length")
	}
	var b bytes.Buffer
	if !g.q.chat {
		c := completionChunk{ID: g.id, Object: "text_completion", Created: g.created, Model: g.q.model,
			Choices: []completionStreamChoice{{Index: 0, Text: tokenText(k), FinishReason: finish}}}
		if usage != nil {
			c.Usage = &usageFull{usageInfo: *usage, PromptTokensDetails: jsonNull}
		}
		writeEvent(&b, c)
		return g.write(b.Bytes())
	}
	if k == 0 {
		first := chatChunk{ID: g.id, Object: "chat.completion.chunk", Created: g.created, Model: g.q.model,
			Choices:        []chatStreamChoice{{Index: 0, Delta: chatDelta{Role: "assistant", Content: ""}}},
			PromptTokenIDs: jsonNull}
		if usage != nil {
			u := newUsage(g.q.inputTokens, 0)
			first.Usage = &u
		}
		writeEvent(&b, first)
	}
	choice := chatStreamChoice{Index: 0, Delta: chatDelta{Content: tokenText(k)}, FinishReason: finish,
		TokenIDs: jsonNull}
	if last {
		choice.StopReason = jsonNull
	}
	writeEvent(&b, chatChunk{ID: g.id, Object: "chat.completion.chunk", Created: g.created, Model: g.q.model,
		Choices: []chatStreamChoice{choice}, Usage: usage})
	return g.write(b.Bytes())
}

func (g *generation) finishStream() {
	var b bytes.Buffer
	if g.q.usage {
		object := "text_completion"
		if g.q.chat {
			object = "chat.completion.chunk"
		}
		writeEvent(&b, usageChunk{ID: g.id, Object: object, Created: g.created, Model: g.q.model,
			Choices: []struct{}{}, Usage: newUsage(g.q.inputTokens, g.generated)})
	}
	b.WriteString("data: [DONE]\n\n")
	g.write(b.Bytes())
}

func (g *generation) respond(text string) {
	usage := usageFull{usageInfo: newUsage(g.q.inputTokens, g.generated), PromptTokensDetails: jsonNull}
	if !g.q.chat {
		writeJSON(g.w, http.StatusOK, completionResponse{ID: g.id, Object: "text_completion", Created: g.created,
			Model: g.q.model, Usage: usage,
			Choices: []completionChoice{{Index: 0, Text: text, FinishReason: "length"}}})
		return
	}
	writeJSON(g.w, http.StatusOK, chatResponse{ID: g.id, Object: "chat.completion", Created: g.created,
		Model: g.q.model, Usage: usage,
		Choices: []chatChoice{{Index: 0, FinishReason: "length",
			Message: chatMessage{Role: "assistant", Content: text, ToolCalls: []struct{}{}}}}})
}

// writeEvent appends one SSE event as vLLM yields it: f"data: {json}\n\n".
func writeEvent(b *bytes.Buffer, v any) {
	b.WriteString("data: ")
	_ = newEncoder(b).Encode(v) // ends with one \n
	b.WriteString("\n")
}

func (g *generation) write(p []byte) bool {
	if _, err := g.w.Write(p); err != nil {
		return false
	}
	return g.rc.Flush() == nil
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
