package facts

import (
	"encoding/json"
	"fmt"
)

// ComparableJSON decodes facts as the probe writes them (FactsFile) and
// returns their comparable facts (Comparable). Facts that do not decode
// are an error, never "no facts".
func ComparableJSON(raw []byte) (map[string]string, error) {
	var f Facts
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("host facts: %w", err)
	}
	return f.Comparable(), nil
}
