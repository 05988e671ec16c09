package report

// pageHTML is the report's template. The Content-Security-Policy forbids
// every fetch (scripts, styles, fonts, images but data: ones, connections):
// the page is complete as it is. The icon link keeps a browser from asking
// for /favicon.ico.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>llmguard spend report: {{.Tenant}}, {{.MonthLabel}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 820px; color: #1d2330; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #d0d5dd; }
.muted { color: #5b6475; font-size: 0.9em; }
.totals { display: flex; gap: 2em; margin: 1em 0; }
.totals div { font-size: 0.9em; }
.totals b { display: block; font-size: 1.4em; }
table { border-collapse: collapse; width: 100%; font-size: 0.85em; margin-top: 0.5em; }
th, td { text-align: right; padding: 3px 8px; border-bottom: 1px solid #eceef2; }
th:first-child, td:first-child { text-align: left; }
svg { display: block; margin-top: 0.5em; }
svg text { font-size: 11px; fill: #5b6475; }
.bar { fill: #3b6fd8; }
.bar.model { fill: #2f9e7a; }
.bar.user { fill: #b4692f; }
.grid { stroke: #eceef2; }
.axis { stroke: #9aa3b2; }
.burn { fill: none; stroke: #c23b3b; stroke-width: 2; }
.point { fill: #c23b3b; }
.ideal { stroke: #9aa3b2; stroke-dasharray: 5 4; }
.over { color: #c23b3b; font-weight: bold; }
</style>
</head>
<body>
<h1 id="title">{{.Tenant}} — {{.MonthLabel}}</h1>
<p class="muted">llmguard spend report for tenant <b id="tenant">{{.Tenant}}</b>, month <b id="month">{{.Month}}</b>:
from <time>{{rfc .Start}}</time> to <time>{{rfc .End}}</time> ({{.TimeZone}}). Amounts in US dollars from the usage ledger
(exact to the micro-dollar in the tables). Input tokens include the cached input and the cache writes, each priced at its own rate.</p>

<div class="totals">
<div>Spend<b id="total-spend">{{usd .Total.CostMicroUSD}}</b></div>
<div>Requests<b id="total-requests">{{.Total.Requests}}</b></div>
<div>Input tokens<b>{{.Total.InputTokens}}</b></div>
<div>Output tokens<b>{{.Total.OutputTokens}}</b></div>
{{if .Budget}}<div>Budget{{if .BudgetName}} ({{.BudgetName}}){{end}}<b id="budget">{{usd .Budget}}</b></div>{{end}}
</div>
{{if not .Total.Requests}}<p id="no-records" class="muted">The ledger read holds no record of this tenant in this month.</p>{{end}}

<h2>Spend per day</h2>
<svg id="days" width="{{f .W}}" height="{{f .H}}" viewBox="0 0 {{f .W}} {{f .H}}" role="img" aria-label="Spend per day">
{{range .YTicks}}<line class="grid" x1="{{f $.PlotLeft}}" x2="{{f $.PlotRight}}" y1="{{f .Pos}}" y2="{{f .Pos}}"/><text x="{{f (add $.PlotLeft -6)}}" y="{{f (add .Pos 4)}}" text-anchor="end">{{.Label}}</text>
{{end}}{{range .DayBars}}<rect class="bar day" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}"><title>{{.Label}}: {{.Value}}</title></rect>
{{end}}<line class="axis" x1="{{f .PlotLeft}}" x2="{{f .PlotRight}}" y1="{{f .PlotBot}}" y2="{{f .PlotBot}}"/>
{{range .DayTicks}}<text x="{{f .Pos}}" y="{{f (add $.PlotBot 16)}}" text-anchor="middle">{{.Label}}</text>
{{end}}</svg>

<h2>Budget burn-down</h2>
{{if .Burn.HasBudget}}<p class="muted">Remaining of the {{.Burn.BudgetText}} budget at the end of each day; the dashed line spends it evenly over the month.
Remaining now: <span id="remaining" {{if .Burn.OverBudget}}class="over"{{end}}>{{.Burn.RemainingLabel}}</span>.</p>
{{else}}<p class="muted">No budget given: cumulative spend at the end of each day; the dashed line is the month's average pace.
The budget is the tenant's monthly <code>usd</code> quota of scope tenant (<code>period: month</code>) in the config given with <code>--config</code>, or <code>--budget-usd</code>.</p>{{end}}
<svg id="burn" width="{{f .W}}" height="{{f .H}}" viewBox="0 0 {{f .W}} {{f .H}}" role="img" aria-label="Budget burn-down">
{{range .Burn.YTicks}}<line class="grid" x1="{{f $.PlotLeft}}" x2="{{f $.PlotRight}}" y1="{{f .Pos}}" y2="{{f .Pos}}"/><text x="{{f (add $.PlotLeft -6)}}" y="{{f (add .Pos 4)}}" text-anchor="end">{{.Label}}</text>
{{end}}<line class="axis" x1="{{f .PlotLeft}}" x2="{{f .PlotRight}}" y1="{{f .Burn.ZeroY}}" y2="{{f .Burn.ZeroY}}"/>
<line class="ideal" x1="{{f .Burn.IdealX1}}" y1="{{f .Burn.IdealY1}}" x2="{{f .Burn.IdealX2}}" y2="{{f .Burn.IdealY2}}"/>
<polyline class="burn" points="{{.Burn.Line}}"/>
{{range .Burn.Points}}<circle class="point" cx="{{f .X}}" cy="{{f .Y}}" r="2.5"><title>{{.Label}}</title></circle>
{{end}}{{range .DayTicks}}<text x="{{f .Pos}}" y="{{f (add $.PlotBot 16)}}" text-anchor="middle">{{.Label}}</text>
{{end}}</svg>

<h2>Spend per model</h2>
<svg id="models" width="{{f .W}}" height="{{f .ModelsH}}" viewBox="0 0 {{f .W}} {{f .ModelsH}}" role="img" aria-label="Spend per model">
{{range .ModelBars}}<text x="{{f (add .X -8)}}" y="{{f .TextY}}" text-anchor="end">{{.Label}}</text><rect class="bar model" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}"><title>{{.Label}}: {{.Value}}</title></rect><text x="{{f (add (add .X .W) 6)}}" y="{{f .TextY}}">{{.Value}}</text>
{{end}}</svg>
<table id="model-table"><tr><th>Model</th><th>Spend</th><th>micro-USD</th><th>Requests</th><th>Errors</th><th>Input tokens</th><th>of which cached</th><th>of which cache writes</th><th>Output tokens</th></tr>
{{range .Models}}<tr><td>{{.Name}}</td><td>{{usd .CostMicroUSD}}</td><td>{{.CostMicroUSD}}</td><td>{{.Requests}}</td><td>{{.Errors}}</td><td>{{.InputTokens}}</td><td>{{.CachedInputTokens}}</td><td>{{.CacheWriteTokens}}</td><td>{{.OutputTokens}}</td></tr>
{{end}}</table>

<h2>Spend per user</h2>
<svg id="users" width="{{f .W}}" height="{{f .UsersH}}" viewBox="0 0 {{f .W}} {{f .UsersH}}" role="img" aria-label="Spend per user">
{{range .UserBars}}<text x="{{f (add .X -8)}}" y="{{f .TextY}}" text-anchor="end">{{.Label}}</text><rect class="bar user" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}"><title>{{.Label}}: {{.Value}}</title></rect><text x="{{f (add (add .X .W) 6)}}" y="{{f .TextY}}">{{.Value}}</text>
{{end}}</svg>
<table id="user-table"><tr><th>User</th><th>Spend</th><th>micro-USD</th><th>Requests</th><th>Errors</th><th>Input tokens</th><th>of which cached</th><th>of which cache writes</th><th>Output tokens</th></tr>
{{range .Users}}<tr><td>{{.Name}}</td><td>{{usd .CostMicroUSD}}</td><td>{{.CostMicroUSD}}</td><td>{{.Requests}}</td><td>{{.Errors}}</td><td>{{.InputTokens}}</td><td>{{.CachedInputTokens}}</td><td>{{.CacheWriteTokens}}</td><td>{{.OutputTokens}}</td></tr>
{{end}}</table>

<p class="muted">Total {{usd .Total.CostMicroUSD}} ({{.Total.CostMicroUSD}} micro-USD) over {{counted .Total.Requests "request" "requests"}}, {{counted .Total.Errors "error" "errors"}} among them. Generated {{rfc .GeneratedAt}} by llmguard report.</p>
</body>
</html>
`
