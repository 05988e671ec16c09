package dashboards

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDashboardsAreImportable checks what Grafana needs to import a
// dashboard and what keeps the three consistent: a unique uid, a schema
// version, the DS_PROMETHEUS input, the datasource and tenant variables,
// every panel on the 24-column grid without overlap, and every query going
// through the ${datasource} variable (never a hard-coded datasource uid).
func TestDashboardsAreImportable(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		t.Run(d.file, func(t *testing.T) {
			if d.UID == "" || len(d.UID) > 40 {
				t.Errorf("uid %q: want 1 to 40 characters", d.UID)
			}
			if other, dup := uids[d.UID]; dup {
				t.Errorf("uid %q is also %s's", d.UID, other)
			}
			uids[d.UID] = d.file
			if !strings.HasPrefix(d.Title, "llmguard / ") {
				t.Errorf("title %q: want the llmguard / prefix", d.Title)
			}
			if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
				t.Errorf("schemaVersion %d: want 36…41 (Grafana 9.4 to 11)", d.SchemaVersion)
			}
			if !slices.Contains(d.Tags, "llmguard") {
				t.Error(`no "llmguard" tag: the dashboards link to each other by it`)
			}
			checkInputs(t, d)
			checkVariables(t, d)
			checkPanels(t, d)
			b, _ := os.ReadFile(d.file)
			if strings.Count(string(b), `"uid":`) != strings.Count(string(b), `"uid": "${datasource}"`)+
				strings.Count(string(b), `"uid": "-- Grafana --"`)+1 {
				t.Error(`a datasource uid other than "${datasource}" (or the built-in annotations' "-- Grafana --")`)
			}
		})
	}
}

func checkInputs(t *testing.T, d *dashboard) {
	t.Helper()
	for _, raw := range d.Inputs {
		var in struct{ Name, Type, PluginID string }
		if json.Unmarshal(raw, &in) == nil && in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus" {
			return
		}
	}
	t.Error(`__inputs lacks {"name": "DS_PROMETHEUS", "type": "datasource", "pluginId": "prometheus"}`)
}

func checkVariables(t *testing.T, d *dashboard) {
	t.Helper()
	var ds, tenant *variable
	for i, v := range d.Templating.List {
		switch v.Name {
		case "datasource":
			ds = &d.Templating.List[i]
		case "tenant":
			tenant = &d.Templating.List[i]
		}
	}
	if ds == nil || ds.Type != "datasource" || ds.queryText() != "prometheus" {
		t.Error(`no "datasource" variable of type datasource over prometheus`)
	}
	if tenant == nil {
		t.Error(`no "tenant" variable`)
		return
	}
	if got := tenant.queryText(); got != "label_values(llmguard_spend_usd_total, tenant)" {
		t.Errorf("tenant variable query %q", got)
	}
	if tenant.Datasource == nil || tenant.Datasource.UID != "${datasource}" {
		t.Errorf("tenant variable datasource %+v, want ${datasource}", tenant.Datasource)
	}
	if tenant.AllValue != ".*" {
		t.Errorf(`tenant variable allValue %q: the panels match tenant=~"$tenant", so "All" must be ".*"`, tenant.AllValue)
	}
}

func checkPanels(t *testing.T, d *dashboard) {
	t.Helper()
	ids := map[int]bool{}
	var cells [24][200]int // panel id occupying each grid cell (y < 200)
	for _, p := range d.allPanels() {
		if ids[p.ID] || p.ID <= 0 {
			t.Errorf("panel %q: id %d is not unique and positive", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		g := p.GridPos
		if g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 || g.Y+g.H > 200 {
			t.Errorf("panel %d %q: gridPos %+v is not on the 24-column grid", p.ID, p.Title, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other := cells[x][y]; other != 0 {
					t.Errorf("panel %d %q overlaps panel %d at x=%d y=%d", p.ID, p.Title, other, x, y)
					x, y = 24, 200
					break
				}
				cells[x][y] = p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %d %q: datasource %+v, want prometheus ${datasource}", p.ID, p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no targets", p.ID, p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %d %q: refId %q missing or repeated", p.ID, p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %d %q target %s: empty expr", p.ID, p.Title, tg.RefID)
			}
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %d %q target %s: datasource %+v, want ${datasource}", p.ID, p.Title, tg.RefID, tg.Datasource)
			}
		}
	}
}
