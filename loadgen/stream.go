package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"
)

// Bounds of one response: the server is not trusted to end its stream,
// to keep its lines short or to send only the tokens asked for.
const (
	maxSSELine       = 1 << 20
	maxResponseBytes = 64 << 20
	maxErrorBody     = 4 << 10
	// tokenSlack: text chunks past max_tokens a response may carry (a
	// tokenizer that splits a token's text across chunks) before the
	// stream counts as running away.
	tokenSlack = 64
)

// request is what one completion asks for.
type request struct {
	Model         string        `json:"model"`
	Prompt        string        `json:"prompt"`
	MaxTokens     int           `json:"max_tokens"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	IgnoreEOS     bool          `json:"ignore_eos"`
	Temperature   float64       `json:"temperature"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// outcome is what one request measured, in milliseconds from its send.
type outcome struct {
	start        time.Time // the send of the attempt the server answered
	inputTokens  int       // the usage chunk's, else the synthetic words, else 0
	outputTokens int
	ttft, e2el   float64
	tpot         float64 // NaN with fewer than 2 tokens
	itl          []float64
	retried      int
	// kind is the failure's class ("http 503", "timeout"); "" completed.
	// detail says more, for the request log.
	kind, detail string
	timedOut     bool
	cancelled    bool // the generator stopped (SIGTERM), not the server
}

// chunk is the part of an SSE data event the generator reads: vLLM's
// completion chunks, a chat delta, a usage chunk, or an error.
type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Object string          `json:"object"`
	Error  json.RawMessage `json:"error"`
}

// client sends the completions of one run.
type client struct {
	http    *http.Client
	url     string
	model   string
	timeout time.Duration
	retries int
}

func newClient(url, model string, timeout time.Duration, retries int,
	wrap func(http.RoundTripper) http.RoundTripper) *client {
	tr := &http.Transport{
		// Loopback to the node's own server: a proxy from the environment
		// would put another hop into every figure.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1 << 16,
		IdleConnTimeout:     90 * time.Second,
		// Compression would hold back bytes in a decoder's buffer and move
		// the arrival times the figures are read from.
		DisableCompression:    true,
		ResponseHeaderTimeout: 0,
	}
	var rt http.RoundTripper = tr
	if wrap != nil {
		rt = wrap(tr)
	}
	return &client{http: &http.Client{Transport: rt}, url: strings.TrimRight(url, "/"), model: model,
		timeout: timeout, retries: retries}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// do sends one streamed completion, retrying a connection that failed
// before the server answered, and measures it from the wire.
func (c *client) do(parent context.Context, prompt string, maxTokens, words int) outcome {
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	body, _ := json.Marshal(request{Model: c.model, Prompt: prompt, MaxTokens: maxTokens, Stream: true,
		StreamOptions: streamOptions{IncludeUsage: true}, IgnoreEOS: true})
	var o outcome
	for attempt := 0; ; attempt++ {
		o = c.once(ctx, body, maxTokens)
		o.retried = attempt
		if o.kind != "connect" || attempt >= c.retries || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	if o.inputTokens == 0 {
		o.inputTokens = words
	}
	if o.kind != "" && ctx.Err() != nil {
		// The generator stopping (SIGTERM) is not the server's failure;
		// the request's own deadline is a timeout.
		if parent.Err() != nil {
			o.cancelled = true
		} else {
			o.kind, o.timedOut = "timeout", true
		}
	}
	return o
}

func (c *client) once(ctx context.Context, body []byte, maxTokens int) outcome {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := outcome{ttft: math.NaN(), e2el: math.NaN(), tpot: math.NaN()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		o.kind, o.detail = "bad request", err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	o.start = time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		o.kind, o.detail = "connection", err.Error()
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			o.kind = "connect"
		}
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		o.kind, o.detail = fmt.Sprintf("http %d", resp.StatusCode), string(msg)
		return o
	}
	if c.read(resp.Body, maxTokens, &o) {
		drain(resp.Body, cancel)
	}
	return o
}

// drain reads what follows data: [DONE] (the chunked body's end), so that
// the connection goes back to the pool: one closed with its body unread is
// not reused, and a new connection per request would put a handshake into
// every TTFT. A server that holds the stream open past [DONE] gets a
// second, then the connection is cut.
func drain(body io.Reader, cancel context.CancelFunc) {
	t := time.AfterFunc(time.Second, cancel)
	defer t.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
}

// read takes the SSE stream apart as vLLM sends it: "data: {json}" events
// separated by blank lines, ended by "data: [DONE]". Each event's time is
// when its first byte arrived. done: the stream reached [DONE].
func (c *client) read(body io.Reader, maxTokens int, o *outcome) (done bool) {
	tr := &timedReader{r: io.LimitReader(body, maxResponseBytes+1)}
	br := bufio.NewReaderSize(tr, 32<<10)
	var (
		data     []byte
		dataAt   time.Time
		last     time.Time
		textSeen int
		usage    = -1
		read     int
	)
	o.itl = make([]float64, 0, min(maxTokens, 4096))
	for {
		// A line that began in the buffer arrived with the read that
		// filled it; else with the next read.
		var at time.Time
		if br.Buffered() > 0 {
			at = tr.last
		} else {
			tr.arm()
		}
		line, err := readLine(br, maxSSELine)
		if at.IsZero() {
			at = tr.takeFirst()
		}
		read += len(line) + 1
		switch {
		case errors.Is(err, errLineTooLong):
			o.kind, o.detail = "line too long", fmt.Sprintf("an SSE line over %d bytes", maxSSELine)
			return
		case read > maxResponseBytes:
			o.kind, o.detail = "response too large", fmt.Sprintf("over %d MiB", maxResponseBytes>>20)
			return
		case err != nil && !errors.Is(err, io.EOF):
			o.kind, o.detail = "stream broken", err.Error()
			return
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data == nil {
				dataAt = at
				data = make([]byte, 0, len(v))
			} else {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
		// An event ends at a blank line; a server that closes the stream
		// right after an event's line ends it too.
		if len(line) == 0 || errors.Is(err, io.EOF) {
			if data != nil {
				if string(data) == "[DONE]" {
					o.e2el = ms(dataAt.Sub(o.start))
					c.finish(o, textSeen, usage)
					return true
				}
				var ch chunk
				if jerr := json.Unmarshal(data, &ch); jerr != nil {
					o.kind, o.detail = "bad chunk", jerr.Error()
					return
				}
				if len(ch.Error) > 0 || ch.Object == "error" {
					o.kind, o.detail = "stream error", string(data)
					return
				}
				if ch.Usage != nil {
					usage = ch.Usage.CompletionTokens
					o.inputTokens = ch.Usage.PromptTokens
				}
				if hasText(&ch) {
					if textSeen == 0 {
						o.ttft = ms(dataAt.Sub(o.start))
					} else {
						o.itl = append(o.itl, ms(dataAt.Sub(last)))
					}
					last = dataAt
					textSeen++
					if textSeen > maxTokens+tokenSlack {
						o.kind = "too many tokens"
						o.detail = fmt.Sprintf("more than %d text chunks for max_tokens %d", textSeen-1, maxTokens)
						return
					}
				}
				data = nil
			}
		}
		if errors.Is(err, io.EOF) {
			o.kind, o.detail = "stream ended early", "the stream closed before data: [DONE]"
			return
		}
	}
}

// finish fills the figures of a completed stream.
func (c *client) finish(o *outcome, textSeen, usage int) {
	o.outputTokens = textSeen
	if usage >= 0 {
		o.outputTokens = usage
	}
	if textSeen == 0 {
		o.kind, o.detail = "no tokens", "the stream ended without a token"
		return
	}
	if o.outputTokens > 1 {
		o.tpot = (o.e2el - o.ttft) / float64(o.outputTokens-1)
	}
}

func hasText(ch *chunk) bool {
	for _, c := range ch.Choices {
		if c.Text != "" || c.Delta != nil && c.Delta.Content != "" {
			return true
		}
	}
	return false
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timedReader notes when the first byte after arm() arrived: the time a
// line began, when the buffer held nothing of it before.
type timedReader struct {
	r     io.Reader
	armed bool
	first time.Time // the read that began the current line
	last  time.Time // the latest read
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.last = time.Now()
		if t.armed {
			t.first, t.armed = t.last, false
		}
	}
	return n, err
}

// arm: the next line starts in the next read.
func (t *timedReader) arm() { t.armed, t.first = true, time.Time{} }

// takeFirst is when the armed read came (zero when none brought a byte).
func (t *timedReader) takeFirst() time.Time {
	t.armed = false
	return t.first
}
