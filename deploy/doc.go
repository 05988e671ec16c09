// Package deploy holds llmguard's deployment files and no Go API: the
// Docker Compose stack's llmguard config (compose/llmguard.yaml), its
// Prometheus config (prometheus/prometheus.yml) and Grafana provisioning
// (grafana/provisioning), next to the repository's Dockerfile and
// docker-compose.yml. Its tests parse all of them, check that every file
// they copy, mount or name exists, that the llmguard config passes
// `llmguard validate --strict`, that Prometheus scrapes llmguard's admin
// listener and Grafana gets the three dashboards of dashboards/, and, where
// a Docker engine answers, build the image.
package deploy
