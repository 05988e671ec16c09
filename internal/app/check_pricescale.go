package app

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/llmguard/llmguard/config"
)

// priceScaleFactor is how far a model's input or output price may stand
// from the embedded table's price for the same name before
// checkPriceScale warns: a hundredfold, well past a negotiated discount
// or a batch price (half), and short of the thousandfold a price per 1K
// tokens, or the millionfold a price per token, is off by.
const priceScaleFactor = 100

// checkPriceScale warns of a model whose input or output price, as the
// config (models: or prices_file) sets it, is a hundredth or less, or a
// hundred times or more, of the embedded table's price for that name
// (config/prices.json, from the providers' price lists): prices are USD
// per million tokens, and a finance team copying a price per 1K tokens
// ($0.00015 for gpt-4o-mini's $0.15) or per token makes every usd limit
// count the model's calls at a thousandth or a millionth of their cost,
// which nothing else reports (trial27: validate said OK). An explicit 0
// (a model billed elsewhere) is left alone.
func checkPriceScale(cfg *config.Config) []Finding {
	table, err := config.ParsePrices(config.DefaultPricesJSON)
	if err != nil {
		return nil // the config's own load has refused it already
	}
	var out []Finding
	for _, name := range slices.Sorted(maps.Keys(cfg.Models)) {
		m, ok := cfg.Models[name]
		ref, known := table[name]
		if !ok || !known || m.AliasOf != "" {
			continue
		}
		for _, side := range []struct {
			field    string
			set, ref float64
		}{
			{"input_usd_per_mtok", m.InputUSDPerMTok, ref.InputUSDPerMTok},
			{"output_usd_per_mtok", m.OutputUSDPerMTok, ref.OutputUSDPerMTok},
		} {
			if side.set <= 0 || side.ref <= 0 {
				continue
			}
			var how string
			switch r := side.set / side.ref; {
			case r <= 1.0/priceScaleFactor:
				how = "1/" + strconv.FormatFloat(roundScale(1/r), 'f', -1, 64) + " of"
			case r >= priceScaleFactor:
				how = strconv.FormatFloat(roundScale(r), 'f', -1, 64) + " times"
			default:
				continue
			}
			out = append(out, Finding{Field: fmt.Sprintf("models.%s.%s", name, side.field), Message: fmt.Sprintf(
				"%v is %s the embedded price table's %v for %s: prices are USD per million tokens (a price per 1K tokens is written 1000 times larger, one per token 1000000 times), so usd limits would count its calls at %s their cost; write the price per million tokens, or give the model another name if it is another model",
				side.set, how, side.ref, name, how)})
		}
	}
	return out
}

// roundScale rounds a price ratio to three significant figures, so that
// 0.00015 against 0.15 reads 1000, not 999.9999999999999.
func roundScale(r float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(r, 'g', 3, 64), 64)
	return v
}
