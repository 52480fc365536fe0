package handlers

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// apiOperation documents one API route. The list is checked against the
// router in tests, so the document cannot drift from the code.
type apiOperation struct {
	Method, Path, Summary, Scope string
	Request                      string // schema name of the JSON body, if any
	Form                         string // schema name of a multipart/form-data body, if any
	Response                     string // schema name of the 2xx body
	Status                       int    // 2xx status (200 when zero)
	Binary                       string // media type for a non-JSON response
	Headers                      []apiHeader
	// Also are the answers of the operation beside its 2xx and the ones
	// every operation may give (401, 403, 404, 422).
	Also []apiAnswer
}

// apiHeader is a request header an operation reads.
type apiHeader struct{ Name, Description string }

// apiAnswer is a status an operation answers with, what it means and the
// schema of its body (Error when empty).
type apiAnswer struct {
	Status              int
	Description, Schema string
}

// flaggerAnswers are the answers of Flagger's webhooks beside 200 (yes).
var flaggerAnswers = []apiAnswer{
	{Status: 409, Description: "No: Flagger waits (confirm-rollout, confirm-promotion) or does not roll back (rollback); Flagger takes any status above 202 for no", Schema: "FlaggerAnswer"},
	{Status: 400, Description: "The body is not a Flagger webhook payload"},
	{Status: 413, Description: "The payload is larger than 64 KiB"},
}

// specTooLarge is the answer of a spec document past acceptance.MaxSpecBytes.
var specTooLarge = apiAnswer{Status: 413, Description: "The document is larger than a spec may be"}

// newVersionAnswers are the answers of a new spec version beside 201.
var newVersionAnswers = []apiAnswer{specTooLarge, {Status: 409, Description: "Nothing changed: the body is the same as the latest version"}}

var apiOperations = []apiOperation{
	{Method: "GET", Path: "/api/v1/programs", Summary: "List the programs the token's user may see", Scope: "read", Response: "ProgramList"},
	{Method: "GET", Path: "/api/v1/programs/{programID}", Summary: "Show a program", Scope: "read", Response: "Program"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/profiles", Summary: "List the program's workload profiles", Scope: "read", Response: "SpecList"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/profiles", Summary: "Create a profile (JSON or YAML body: a profile spec) as version 1", Scope: "run", Request: "ProfileSpec", Response: "SpecVersion", Status: 201, Also: []apiAnswer{specTooLarge}},
	{Method: "GET", Path: "/api/v1/programs/{programID}/profiles/{specID}", Summary: "Show a profile's latest version", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/profiles/{specID}/versions/{version}", Summary: "Show one version of a profile", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/profiles/{specID}/versions/{version}/yaml", Summary: "Export one version of a profile as YAML (profiles as code; the same document the page exports)", Scope: "read", Binary: "application/yaml"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/profiles/{specID}/versions", Summary: "Add a version to a profile (409 when nothing changed)", Scope: "run", Request: "ProfileSpec", Response: "SpecVersion", Status: 201, Also: newVersionAnswers},
	{Method: "GET", Path: "/api/v1/programs/{programID}/profile-versions/{versionID}", Summary: "Show a profile version by its id (the id a run names), without its profile id", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/hosts", Summary: "List the program's lab hosts", Scope: "read", Response: "HostList"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/runs", Summary: "List the program's runs, newest first (?state= filters)", Scope: "read", Response: "RunList"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/runs", Summary: "Submit a run: profile version × host × gate set version × optional baseline run", Scope: "run", Request: "RunRequest", Response: "Run", Status: 201,
		Headers: []apiHeader{{"Idempotency-Key", "Optional; up to 200 printable ASCII characters. The same request sent again with the same key (its answer was lost) gets the run it started, with status 200 and the header Idempotent-Replayed: true, instead of starting another; the key used again for a different request is refused with 422."}},
		Also:    []apiAnswer{{Status: 200, Description: "The run this Idempotency-Key started already (the same request sent again; header Idempotent-Replayed: true)", Schema: "Run"}}},
	{Method: "POST", Path: "/api/v1/programs/{programID}/runs/import", Summary: "Import a tool's result file (fio, vLLM, GenAI-Perf, AIPerf) as a run, as the import page does: the run and the import's report (every field read, every field ignored with its reason, the tool's figures beside Accord's under the tool's own percentile definition, fio's per-job view)", Scope: "run", Form: "ImportForm", Response: "ImportResult", Status: 201, Also: []apiAnswer{{Status: 400, Description: "The body is not a well-formed multipart form"}, {Status: 413, Description: "The form is larger than an import may be"}}},
	{Method: "GET", Path: "/api/v1/programs/{programID}/runs/{runID}", Summary: "Show a run: state, progress, verdict", Scope: "read", Response: "Run"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/runs/{runID}/evaluation", Summary: "The run's latest evaluation: every criterion's verdict with its numbers and explanation", Scope: "read", Response: "Evaluation"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/runs/{runID}/measurements", Summary: "The run's canonical measurements (summaries; raw values in the report bundle and the CSV): of a multi-host run the hosts combined, and with ?hosts=1 each host's own too, marked with its host", Scope: "read", Response: "MeasurementList"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/runs/{runID}/report.tar.gz", Summary: "Download the run's signed report bundle (verify it offline with VERIFY.md or `accord verify`); 404 until the run is signed", Scope: "read", Binary: "application/gzip"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/runs/{runID}/cancel", Summary: "Cancel a run: the probe is stopped on the host", Scope: "run", Response: "Run", Status: 202},
	{Method: "GET", Path: "/api/v1/programs/{programID}/gatesets", Summary: "List the program's gate sets", Scope: "read", Response: "SpecList"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/gatesets", Summary: "Create a gate set (JSON or YAML body) as version 1", Scope: "run", Request: "GateSetSpec", Response: "SpecVersion", Status: 201, Also: []apiAnswer{specTooLarge}},
	{Method: "GET", Path: "/api/v1/programs/{programID}/gatesets/{specID}", Summary: "Show a gate set's latest version", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/gatesets/{specID}/versions/{version}", Summary: "Show one version of a gate set", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/gatesets/{specID}/versions/{version}/yaml", Summary: "Export one version of a gate set as YAML (profiles as code; the same document the page exports)", Scope: "read", Binary: "application/yaml"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/gatesets/{specID}/versions", Summary: "Add a version to a gate set (409 when nothing changed)", Scope: "run", Request: "GateSetSpec", Response: "SpecVersion", Status: 201, Also: newVersionAnswers},
	{Method: "GET", Path: "/api/v1/programs/{programID}/gateset-versions/{versionID}", Summary: "Show a gate set version by its id (the id a run names), without its gate set id", Scope: "read", Response: "SpecVersion"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/rollout", Summary: "The rollout: each stage's state, gates with current verdicts, approvals given and awaited, halts, production watch", Scope: "read", Response: "Rollout"},
	{Method: "POST", Path: "/api/v1/programs/{programID}/rollout/decisions", Summary: "Take a decision on the current stage (approve, waive, reject, halt, resume, rollback-requested) for the token user's side; 422 with the reason when the rules refuse it. A halt is open to any member of the program; the other kinds to approvers and owners (403 otherwise)", Scope: "approve", Request: "DecisionRequest", Response: "DecisionCreated", Status: 201},
	{Method: "GET", Path: "/api/v1/programs/{programID}/decisions", Summary: "The decision log with its verification (verified, or the first bad record)", Scope: "read", Response: "DecisionList"},
	{Method: "GET", Path: "/api/v1/programs/{programID}/decisions/export", Summary: "The whole decision log as `accord verify` checks it (accord-decision-log/v1)", Scope: "read", Response: "DecisionLog"},
	{Method: "GET", Path: "/api/v1/deploy/programs/{programID}/stages/{stage}", Summary: "A rollout stage as a deployer reads it (Argo Rollouts' web metric provider): state approved (both sides signed it off), halted (stop-loss, halt, rejection or rollback request) or waiting; always 200 for a stage of the plan", Scope: "deploy", Response: "StageGate"},
	{Method: "POST", Path: "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/confirm-rollout", Summary: "Flagger's confirm-rollout webhook: 200 once the rollout reached the stage (it is current or approved) and it is not halted, else 409", Scope: "deploy", Request: "FlaggerPayload", Response: "FlaggerAnswer", Also: flaggerAnswers},
	{Method: "POST", Path: "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/confirm-promotion", Summary: "Flagger's confirm-promotion webhook: 200 once both sides approved the stage, else 409", Scope: "deploy", Request: "FlaggerPayload", Response: "FlaggerAnswer", Also: flaggerAnswers},
	{Method: "POST", Path: "/api/v1/deploy/programs/{programID}/stages/{stage}/flagger/rollback", Summary: "Flagger's rollback webhook: 200 when Accord halted the stage (stop-loss, halt, rejection or rollback request), else 409", Scope: "deploy", Request: "FlaggerPayload", Response: "FlaggerAnswer", Also: flaggerAnswers},
	{Method: "GET", Path: "/api/v1/programs/{programID}/decisions/head", Summary: "The decision log's signed head (seq, hash, time): `accord verify FILE --head` tells whether an export is behind", Scope: "read", Response: "LogHead"},
}

var apiSchemas = map[string]any{
	"Error": obj(map[string]any{"error": str(), "fields": map[string]any{"type": "object", "additionalProperties": str()}, "request_id": str()}),
	"Program": obj(map[string]any{"id": integer(), "name": str(), "vendor": str(), "customer": str(), "role": str(),
		"created_at": map[string]any{"type": "string", "format": "date-time"}}),
	"ProgramList": obj(map[string]any{"programs": arr(ref("Program"))}),
	"Host": obj(map[string]any{"id": integer(), "name": str(), "address": str(), "port": integer(), "host_key_pinned": boolean(), "emulated": boolean(),
		"labels": map[string]any{"type": "object", "additionalProperties": str()}}),
	"HostList": obj(map[string]any{"hosts": arr(ref("Host"))}),
	"RunRequest": map[string]any{"type": "object", "required": []any{"profile_version_id", "host_id"}, "properties": map[string]any{
		"profile_version_id": integer(), "host_id": integer(), "gate_set_version_id": integer(), "baseline_run_id": integer(), "label": str(),
		"confirm_readiness": map[string]any{"type": "boolean", "description": "run although the host fails blocking readiness checks (recorded with the run)"}}},
	"Run": obj(map[string]any{"id": integer(), "state": map[string]any{"type": "string", "enum": []any{"queued", "waiting_for_host", "preparing", "running", "collecting", "evaluating", "done", "failed", "cancelled"}},
		"final": boolean(), "settled": boolean(), "reason": str(), "verdict": map[string]any{"type": "string", "enum": []any{"", "PASS", "FAIL", "INCONCLUSIVE", "INCOMPARABLE"}},
		"label": str(), "kind": str(), "emulated": boolean(), "profile_version_id": integer(), "profile": str(), "gate_set_version_id": integer(), "gate_set": str(),
		"host_id": integer(), "host": str(), "baseline_run_id": integer(), "progress": number(), "progress_text": str(),
		"created_at": map[string]any{"type": "string", "format": "date-time"}, "started_at": map[string]any{"type": "string", "format": "date-time"},
		"finished_at": map[string]any{"type": "string", "format": "date-time"}, "url": str(), "has_report": boolean(),
		"contaminated":  map[string]any{"type": "boolean", "description": "another run was active on the host while this one measured: never PASS"},
		"contamination": map[string]any{"type": "array", "items": str(), "description": "which runs, when (GET of one run only)"},
		"warnings": map[string]any{"type": "array", "description": "what the pre-run check said of the request (criteria that could not all be judged); the run started anyway",
			"items": obj(map[string]any{"kind": map[string]any{"type": "string", "enum": []any{"no-baseline", "profile-shape", "host-facts", "too-few-requests"}}, "criterion": str(), "message": str()})}}),
	"RunList": obj(map[string]any{"runs": arr(ref("Run"))}),
	"ImportForm": obj(map[string]any{"file": map[string]any{"type": "string", "contentEncoding": "binary", "description": "the tool's output file"},
		"profile_version": integer(), "format": str(), "step": str(), "gate_set_version": integer(), "baseline": integer(), "label": str()}),
	"ImportResult": obj(map[string]any{"run": ref("Run"), "report": obj(map[string]any{"input": str(), "format": str(), "tool": str(), "tool_version": str(), "measurements": integer(),
		"read":     arr(obj(map[string]any{"field": str(), "metric": str(), "note": str()})),
		"ignored":  arr(obj(map[string]any{"field": str(), "reason": str()})),
		"warnings": arr(str()), "figures": arr(map[string]any{"type": "object"}), "jobs": arr(map[string]any{"type": "object"})})}),
	"Evaluation": map[string]any{"type": "object", "description": "engine_version, inputs (digests), gate_set, correction, verdict, explanation, comparability, contamination[] (other runs active on the host: the verdict is then never PASS), criteria[] (name, metric, statistic, mode, comparator, threshold, limit, unit, severity, confidence, verdict, p_value, holm, series[] with estimate, lower, upper, interval, method, candidate/baseline summaries, needed, explanation)"},
	"Measurement": obj(map[string]any{"metric": str(), "unit": str(), "step": str(), "level": str(), "repetition": integer(), "host": str(),
		"summary": obj(map[string]any{"n": integer(), "min": number(), "p50": number(), "p90": number(), "p95": number(), "p99": number(), "p999": number(), "max": number(), "mean": number(),
			"tool_figures": map[string]any{"type": "array", "description": "the tool's own figures (statistic, tool) with Accord's from the same samples by the tool's percentile definition (accord, definition: nearest-rank, numpy-linear, fio-bins or fio-bins-double for fio before 3.14), Accord's canonical nearest-rank figure and the difference in percent", "items": map[string]any{"type": "object"}}}),
		"tool_summary": map[string]any{"type": "object", "additionalProperties": number()}, "source": map[string]any{"type": "object"}}),
	"MeasurementList": obj(map[string]any{"measurements": arr(ref("Measurement"))}),
	"SpecSummary": obj(map[string]any{"id": integer(), "name": str(), "latest_version": integer(), "latest_digest": str(),
		"updated_at": map[string]any{"type": "string", "format": "date-time"}}),
	"SpecList": map[string]any{"type": "object", "description": "{\"profiles\": [...]} or {\"gatesets\": [...]}", "additionalProperties": arr(ref("SpecSummary"))},
	"SpecVersion": obj(map[string]any{"spec_id": integer(), "version_id": integer(), "version": integer(), "digest": str(), "note": str(),
		"created_at": map[string]any{"type": "string", "format": "date-time"}, "spec": map[string]any{"type": "object"}}),
	"ProfileSpec": map[string]any{"type": "object", "description": "A workload profile: schema_version, name, purpose, storage, repetitions, warmup, steps (fio, inference, command, drop-caches, pause, fault, gpu-path), telemetry (Prometheus exporters scraped every second). See the help page and the YAML export of any profile.",
		"required": []any{"name", "purpose", "steps"}},
	"Rollout": map[string]any{"type": "object", "description": "status (in-progress, halted, complete, rejected, rollback-requested), broken (the log does not replay), current_stage, decisions (count), rollback, stages[]: position, name, description, state (pending, awaiting-approval, approved, rejected, halted), attempt, current, gates {gate_set, gate_set_version_id, pass, profiles[] {profile_id, profile, run_id, verdict, pinned, problem}}, approvals[] and resumes[] {kind, actor, side, reason, at}, awaiting (sides), waived, halt, rejection, watch"},
	"DecisionRequest": map[string]any{"type": "object", "required": []any{"kind"}, "properties": map[string]any{
		"kind":   map[string]any{"type": "string", "enum": []any{"approve", "waive", "reject", "halt", "stop-loss-triggered", "resume", "rollback-requested"}},
		"stage":  map[string]any{"type": "string", "description": "the current stage's name (required except for rollback-requested): a decision about another stage is refused"},
		"reason": map[string]any{"type": "string", "description": "required for everything but approve, for which it is an optional comment; kept in the signed record; at most 4000 characters of plain text"}}},
	"DecisionRecord": obj(map[string]any{"record": obj(map[string]any{"chain": str(), "seq": integer(), "kind": str(), "actor": str(), "organisation": str(),
		"time": map[string]any{"type": "string", "format": "date-time"}, "stage": str(), "reason": str(), "prev_hash": str(),
		"evidence": obj(map[string]any{"run_ids": arr(str()), "verdicts": map[string]any{"type": "object", "additionalProperties": str()}, "digests": map[string]any{"type": "object", "additionalProperties": str()}})}),
		"hash": str()}),
	"DecisionCreated": obj(map[string]any{"decision": ref("DecisionRecord"), "events": arr(str()), "rollout": ref("Rollout")}),
	"DecisionList":    obj(map[string]any{"chain": str(), "verified": boolean(), "problem": str(), "head_seq": integer(), "head": str(), "decisions": arr(ref("DecisionRecord"))}),
	"DecisionLog":     map[string]any{"type": "object", "description": "format accord-decision-log/v1: chain, records[] {record, hash, envelope (DSSE)}, checkpoint (DSSE over the head), earlier_checkpoints[] (the ones it superseded); verify with `accord verify FILE --keys keys.json`"},
	"LogHead":         map[string]any{"type": "object", "description": "format accord-decision-head/v1: chain, seq, head, time, checkpoint (DSSE over the head); `accord verify FILE --keys keys.json --head head.json`"},
	"StageGate": obj(map[string]any{"program_id": integer(), "stage": str(), "state": map[string]any{"type": "string", "enum": []any{"approved", "halted", "waiting"}},
		"approved": boolean(), "halted": boolean(), "stage_state": str(), "current": boolean(), "approved_by": arr(str()), "reason": str(),
		"checked_at": map[string]any{"type": "string", "format": "date-time"}}),
	"FlaggerPayload": map[string]any{"type": "object", "description": "The payload Flagger posts to a webhook. Flagger's webhooks send no headers: put the deploy token in metadata.token (or send Authorization: Bearer).",
		"properties": map[string]any{"name": str(), "namespace": str(), "phase": str(), "checksum": str(),
			"metadata": map[string]any{"type": "object", "additionalProperties": str()}}},
	"FlaggerAnswer": obj(map[string]any{"hook": str(), "yes": boolean(), "gate": ref("StageGate")}),
	"GateSetSpec": map[string]any{"type": "object", "description": "A gate set: schema_version, name, correction, stop_loss_consecutive, criteria (metric, statistic, mode, comparator, threshold, unit, confidence, min_samples, severity, stop_loss).",
		"required": []any{"name", "criteria"}},
}

func obj(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}
func str() map[string]any            { return map[string]any{"type": "string"} }
func integer() map[string]any        { return map[string]any{"type": "integer"} }
func number() map[string]any         { return map[string]any{"type": "number"} }
func boolean() map[string]any        { return map[string]any{"type": "boolean"} }
func arr(items any) map[string]any   { return map[string]any{"type": "array", "items": items} }
func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

var pathParam = regexp.MustCompile(`\{([A-Za-z]+)\}`)

func openAPIDocument(base *url.URL) map[string]any {
	paths := map[string]any{}
	for _, op := range apiOperations {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[op.Path] = item
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": str()})
		}
		for _, h := range op.Headers {
			params = append(params, map[string]any{"name": h.Name, "in": "header", "required": false, "description": h.Description, "schema": str()})
		}
		status := op.Status
		if status == 0 {
			status = 200
		}
		okResp := map[string]any{"description": "OK"}
		switch {
		case op.Binary != "":
			okResp["content"] = map[string]any{op.Binary: map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
		case op.Response != "":
			okResp["content"] = map[string]any{"application/json": map[string]any{"schema": ref(op.Response)}}
		}
		errResp := map[string]any{"description": "Error", "content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}}
		responses := map[string]any{
			strconv.Itoa(status): okResp, "401": errResp, "403": errResp, "404": errResp, "422": errResp,
		}
		for _, a := range op.Also {
			schema := a.Schema
			if schema == "" {
				schema = "Error"
			}
			responses[strconv.Itoa(a.Status)] = map[string]any{"description": a.Description,
				"content": map[string]any{"application/json": map[string]any{"schema": ref(schema)}}}
		}
		o := map[string]any{
			"summary":     op.Summary,
			"operationId": operationID(op),
			"security":    []any{map[string]any{"bearer": []any{}}},
			"description": "Needs a token with the " + op.Scope + " scope.",
			"responses":   responses,
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if op.Request != "" {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref(op.Request)}}}
		}
		if op.Form != "" {
			o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"multipart/form-data": map[string]any{"schema": ref(op.Form)}}}
		}
		item[strings.ToLower(op.Method)] = o
	}
	server := "/"
	if base != nil {
		server = base.String()
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Accord API",
			"version":     "v1",
			"description": "Joint acceptance testing of NVMe-oF storage for AI inference. Authenticate with a personal API token (Authorization: Bearer TOKEN) created on the API tokens page.",
		},
		"servers": []any{map[string]any{"url": server}},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         apiSchemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
		},
	}
}

func operationID(op apiOperation) string {
	parts := []string{strings.ToLower(op.Method)}
	for _, p := range strings.Split(strings.TrimPrefix(op.Path, "/api/v1/"), "/") {
		if strings.HasPrefix(p, "{") {
			continue
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "_")
}
