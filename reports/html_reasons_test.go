package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// Page 1 holds the result, the card and why: a few reasons whole, many
// as the first few and "and N more", linked to every one of them below
// (the reasons were after a page break, on pages 2 and 3 at 256 nodes).
func TestReasonsAreOnTheFirstPage(t *testing.T) {
	render := func(fails int) string {
		var diag []int
		for i := 0; i < fails; i++ {
			diag = append(diag, i*3)
		}
		run := fleet{n: 64, interQuoted: 370, diagFail: diag}.run()
		k := 0
		for i := range run.Verdicts {
			if v := &run.Verdicts[i]; v.ID == "DIAG-001" && v.Status == record.Fail {
				v.Detail = fmt.Sprintf("dcgmi diag -r 3: fault %d", k) // each node its own reason
				k++
			}
		}
		var b bytes.Buffer
		if err := HTML(&b, run, nil); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	// list is the reasons list of page that starts with open.
	list := func(page, open string) string {
		_, l, _ := strings.Cut(page, open)
		l, _, _ = strings.Cut(l, "</ul>")
		return l
	}
	page := render(2)
	if !strings.Contains(page, `<section class="page" id="why">`) {
		t.Fatal("no second page")
	}
	first, _, _ := strings.Cut(page, `<section class="page" id="why">`)
	if l := list(first, `<h2>Not accepted because</h2>`+"\n"+`<ul id="failed">`); strings.Count(l, "fault ") != 2 || strings.Contains(l, " more</a>") {
		t.Errorf("two reasons are not both on page 1: %s", l)
	}
	if strings.Contains(page, `id="all-failed"`) {
		t.Errorf("two reasons listed again after page 1")
	}

	page = render(9)
	first, rest, _ := strings.Cut(page, `<section class="page" id="why">`)
	l := list(first, `<ul id="failed">`)
	if n := strings.Count(l, "fault "); n != reasonsOnPage1-1 || !strings.HasSuffix(l, `<li><a href="#all-failed">and 6 more</a></li>`) {
		t.Errorf("page 1 shows %d of 9 reasons: %s", n, l)
	}
	if l := list(rest, `<h2 id="all-failed">Not accepted because: all 9</h2>`); strings.Count(l, "fault ") != 9 {
		t.Errorf("the full list is not below: %s", l)
	}
}
