package parse

import "strings"

// What tells one GPU SKU from another of the same name: the board part
// number and the maximum power limit its board allows. Both are in every
// full `nvidia-smi -q`, kept in QueryGPU.Fields; these read them.

// BoardPartNumber is the GPU's "Board Part Number" ("692-2G520-0282-000"),
// "" when the driver says N/A (GeForce cards) or the section lacks it
// (-q -d).
func BoardPartNumber(g QueryGPU) string {
	if v := g.Fields["Board Part Number"]; !isNA(v) {
		return v
	}
	return ""
}

// MaxPowerLimitW is the highest power limit the board allows (not the one
// set now): "Max Power Limit" under "GPU Power Readings" (R535 on) or
// "Power Readings" (before). 0 when N/A or absent; an unreadable value is
// an error naming it.
func MaxPowerLimitW(g QueryGPU) (float64, error) {
	for _, k := range []string{"GPU Power Readings.Max Power Limit", "Power Readings.Max Power Limit"} {
		if v := g.Fields[k]; !isNA(v) {
			w, err := quantity(v, "W")
			if err != nil {
				return 0, err
			}
			return w, nil
		}
	}
	return 0, nil
}

// CSVWatts reads a --query-gpu power cell ("700.00 W", "700.00" under
// nounits); "[N/A]", "[Not Supported]" and an absent cell are 0.
func CSVWatts(cell string) (float64, error) {
	if isNA(cell) {
		return 0, nil
	}
	if !strings.HasSuffix(cell, " W") {
		cell += " W"
	}
	return quantity(cell, "W")
}
