package config

import (
	"strings"
	"testing"
)

// output_reservation.pin: off unless set, read as a YAML boolean; any
// other value is refused with its line (by the decoder, as for every
// boolean field: none is named by its path yet).
func TestOutputReservationPin(t *testing.T) {
	const head = "upstreams: [{name: o, flavor: openai, base_url: \"http://x\", no_key: true}]\n"
	c, err := Parse([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if c.OutputReservation.Pin {
		t.Error("pin is on by default; want off")
	}
	c, err = Parse([]byte(head + "output_reservation: {pin: true}\n"))
	if err != nil || !c.OutputReservation.Pin || c.OutputReservation.Learn {
		t.Fatalf("pin: true: %+v, %v; want pin on, learn off", c.OutputReservation, err)
	}
	_, err = Parse([]byte(head + "output_reservation: {pin: sometimes}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("pin: sometimes: err = %v, want one naming line 2 and the value", err)
	}
}
