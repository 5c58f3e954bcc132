package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gpuaccept/orchestrator/record"
)

// The cost ledger as the reports show it: one line for the terminal, the
// same tables for report.md and report.html.

// costLine is the summary's line, "" without a ledger: "cost: 12.34 USD
// for 3 accepted node(s) = 4.11 USD per accepted node (billed 1m
// granularity)".
func costLine(l *record.Ledger) string {
	if l == nil {
		return ""
	}
	unit := orNone(oneLine(l.Unit))
	s := fmt.Sprintf("cost: %s for %s %s(s)", costMoney(l.TotalCost, l.Currency), costCount(l.AcceptedUnits), unit)
	if l.CostPerUnit != nil {
		s += fmt.Sprintf(" = %s per %s", costMoney(*l.CostPerUnit, l.Currency), unit)
	} else {
		s += fmt.Sprintf(": no cost per %s", unit)
	}
	return s + fmt.Sprintf(" (billed %s granularity)", orNone(oneLine(l.Granularity)))
}

// costBrief is the cost in a clause: "cost 1.33 USD, 0.66 USD per
// accepted node".
func costBrief(l *record.Ledger) string {
	if l == nil {
		return ""
	}
	s := "cost " + costMoney(l.TotalCost, l.Currency)
	if l.CostPerUnit != nil {
		return s + ", " + costMoney(*l.CostPerUnit, l.Currency) + " per " + orNone(oneLine(l.Unit))
	}
	return s + ", no " + orNone(oneLine(l.Unit))
}

// costIntro says how the nodes were billed.
func costIntro(l *record.Ledger) string {
	return fmt.Sprintf("Every node billed for the whole window, rounded up to %s, at %s per GPU-hour; "+
		"idle and failed time are inside the billed time, not added to it.",
		orNone(oneLine(l.Granularity)), costMoney(l.PricePerGPUHour, l.Currency))
}

// costPerUnit is the ledger's last word: the cost of a unit of accepted
// work, or why there is none.
func costPerUnit(l *record.Ledger) string {
	unit := orNone(oneLine(l.Unit))
	if l.CostPerUnit == nil {
		return fmt.Sprintf("Cost per %s from the ledger: none (%s for %s %s(s)).", unit, costMoney(l.TotalCost, l.Currency), costCount(l.AcceptedUnits), unit)
	}
	return fmt.Sprintf("Cost per %s from the ledger: %s (%s ÷ %s %s(s)).", unit, costMoney(*l.CostPerUnit, l.Currency),
		costMoney(l.TotalCost, l.Currency), costCount(l.AcceptedUnits), unit)
}

func costNodeHeader(l *record.Ledger) []string {
	return []string{"Node", "GPUs", "Seconds", "Billed seconds", "Cost" + costCurrencyNote(l.Currency), "Idle seconds", "Failed seconds", "Accepted"}
}

func costNodeRows(l *record.Ledger) [][]string {
	rows := make([][]string, 0, len(l.Nodes))
	for _, n := range l.Nodes {
		acc := "no"
		if n.Accepted {
			acc = "yes"
		}
		rows = append(rows, []string{n.Name, strconv.Itoa(n.GPUs), costSeconds(n.Secs), costSeconds(n.BilledSecs),
			costAmount(n.Cost), costSeconds(n.IdleSecs), costSeconds(n.FailedSecs), acc})
	}
	return rows
}

func costComponentHeader(l *record.Ledger) []string {
	return []string{"Component", "Cost" + costCurrencyNote(l.Currency)}
}

// costComponentRows: compute, each extra once (known ones in their order,
// any other after them by name), the total.
func costComponentRows(l *record.Ledger) [][]string {
	rows := [][]string{{fmt.Sprintf("compute (%s GPU-hours)", strconv.FormatFloat(l.BilledGPUHours, 'f', 3, 64)), costAmount(l.ComputeCost)}}
	for _, k := range costOrdered(l.Extras, record.LedgerExtras) {
		rows = append(rows, []string{k, costAmount(l.Extras[k])})
	}
	return append(rows, []string{"total", costAmount(l.TotalCost)})
}

func costTCOHeader(l *record.Ledger) []string {
	cur := l.Currency
	if cur == "" {
		cur = "cost"
	}
	return []string{"Component", cur + " per month"}
}

func costTCORows(t *record.TCO) [][]string {
	var rows [][]string
	for _, k := range costOrdered(t.Components, record.TCOComponents) {
		rows = append(rows, []string{strings.ReplaceAll(k, "_", " "), costAmount(t.Components[k])})
	}
	return append(rows, []string{"total", costAmount(t.Monthly)})
}

// costOrdered lists m's keys: those of known in its order, then the rest
// sorted, so a run.json from elsewhere loses nothing.
func costOrdered(m map[string]float64, known []string) []string {
	var out, rest []string
	for _, k := range known {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	for k := range m {
		if !slices.Contains(known, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

func costCurrencyNote(cur string) string {
	if cur == "" {
		return ""
	}
	return " (" + cur + ")"
}

// costAmount is a sum of money: cents, or three significant digits below a
// cent (a cost per training step).
func costAmount(x float64) string {
	if x != 0 && math.Abs(x) < 0.01 {
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func costMoney(x float64, cur string) string {
	if cur == "" {
		return costAmount(x)
	}
	return costAmount(x) + " " + cur
}

// costSeconds: whole seconds as they are, fractions to a tenth.
func costSeconds(x float64) string {
	if x == math.Trunc(x) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// costCount is a count of units as a person writes it: 3, 1000, 12.5.
func costCount(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// costCells folds the cells to one line and fills blanks, as every table
// here does.
func costCells(rows [][]string) [][]string {
	return cells(rows, func(_ int, s string) string { return s })
}
