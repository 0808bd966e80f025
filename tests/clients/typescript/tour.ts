// A compiler's first steps with kairos from TypeScript: types generated from the OpenAPI
// document (schema.d.ts, written next to this file before it is compiled) and a typed fetch
// client, no hand-written request or answer types. It deploys a workflow with a schedule,
// reads the schedule back, triggers a run twice with one request id, reads the run, and is
// refused where the document says it will be. Type-checked with `strict`, then run with node.
//
// Environment: KAIROS_URL, KAIROS_DEPLOYER_TOKEN, KAIROS_READER_TOKEN.

import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Run = components["schemas"]["Run"];
type DeploySchedule = components["schemas"]["DeploySchedule"];

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`${name} is not set`);
  return value;
}

function check(condition: boolean, what: string, got?: unknown): asserts condition {
  if (!condition) throw new Error(`${what}${got === undefined ? "" : `: ${JSON.stringify(got)}`}`);
}

/** The keys of `T`, every one of them: the compiler refuses a list that misses one. */
function allKeys<T>() {
  return <const K extends readonly (keyof T)[]>(
    ...keys: K & ([keyof T] extends [K[number]] ? unknown : never)
  ): readonly string[] => keys.map(String);
}

const RUN_KEYS = allKeys<Run>()(
  "idempotency_key",
  "schedule_id",
  "run_at",
  "fire_at",
  "status",
  "source",
  "workflow_id",
  "version",
  "user_id",
  "run_id",
  "attempts",
  "reason",
  "last_error",
  "published_at",
  "started_at",
  "finished_at",
  "executor_id",
  "created_at",
  "updated_at",
  "attempt",
  "next_attempt_at",
  "heartbeat_at",
  "dead_lettered_at",
  "parent_key",
  "schedule_revision",
  "deadline_at",
  "late_at",
  "late_reason",
  "region",
);

/** An answer must hold no field its type does not declare. */
function declaredOnly(value: object, declared: readonly string[], what: string): void {
  const extra = Object.keys(value).filter((key) => !declared.includes(key));
  check(extra.length === 0, `${what} carries fields the document does not declare`, extra);
}

const baseUrl = env("KAIROS_URL");
const deployer = createClient<paths>({
  baseUrl,
  headers: { Authorization: `Bearer ${env("KAIROS_DEPLOYER_TOKEN")}` },
});
const reader = createClient<paths>({
  baseUrl,
  headers: { Authorization: `Bearer ${env("KAIROS_READER_TOKEN")}` },
});

const WORKFLOW = "ts-tour";
const SCHEDULE: DeploySchedule = {
  schedule_id: "ts-tour-hourly",
  user_id: "carol",
  cron_expr: "0 * * * *",
  timezone: "Asia/Tokyo",
  overlap_policy: "allow",
  max_attempts: 2,
  retry_backoff: { initial_s: 30, multiplier: 2, max_s: 600 },
};

async function deploy(): Promise<void> {
  const { data, error, response } = await deployer.PUT("/workflows/{id}/versions/{version}", {
    params: { path: { id: WORKFLOW, version: 1 } },
    body: {
      dag: {
        nodes: [
          { id: "build", action: "make dist" },
          { id: "ship", action: "upload", depends_on: ["build"], retries: 2 },
        ],
      },
      schedules: [SCHEDULE],
    },
  });
  check(error === undefined && data !== undefined, "deploy refused", error);
  check(response.status === 201, "deploy status", response.status);
  check("created" in data, "a deploy answer, not a dry run", data);
  check(data.created && data.workflow_id === WORKFLOW && data.version === 1, "deploy answer", data);
  check(data.removed.length === 0, "nothing removed", data.removed);
  const [only] = data.schedules;
  check(data.schedules.length === 1 && only !== undefined, "one schedule", data.schedules);
  check(only.schedule_id === "ts-tour-hourly" && only.revision === 1, "the schedule", only);
  check(only.next_run_at !== null && only.next_run_at.endsWith(":00:00Z"), "next tick", only);
}

async function readSchedule(): Promise<void> {
  const { data, error } = await reader.GET("/schedules/{id}", {
    params: { path: { id: "ts-tour-hourly" } },
  });
  check(error === undefined && data !== undefined, "schedule not read", error);
  check(data.timezone === "Asia/Tokyo" && data.overlap_policy === "allow", "schedule", data);
  check(data.max_attempts === 2 && data.retry_backoff?.max_s === 600, "failure policy", data);
  const preview = data.preview ?? [];
  check(preview.length === 5, "five upcoming ticks", preview);
  // The planner writes runs ahead, so next_run_at may already be the tick after the first.
  check(preview.slice(0, 2).some((at) => at === data.next_run_at), "next tick", data);
}

async function trigger(): Promise<string> {
  const request = {
    params: { path: { id: "ts-tour-hourly" } },
    body: { request_id: "ts-tour-1" },
  };
  const first = await deployer.POST("/schedules/{id}/trigger", request);
  check(first.error === undefined && first.data !== undefined, "trigger refused", first.error);
  check(first.response.status === 201, "a new run", first.response.status);
  const run: Run = first.data;
  declaredOnly(run, RUN_KEYS, "the triggered run");
  check(run.schedule_id === "ts-tour-hourly" && run.source === "manual", "run", run);
  check(run.workflow_id === WORKFLOW && run.user_id === "carol" && run.attempt === 1, "run", run);
  check(["PENDING", "ENQUEUED"].includes(run.status), "a fresh run", run.status);

  const again = await deployer.POST("/schedules/{id}/trigger", request);
  check(again.data !== undefined && again.response.status === 200, "same request", again.error);
  check(again.data.idempotency_key === run.idempotency_key, "the same run", again.data);
  return run.idempotency_key;
}

async function readRun(key: string): Promise<void> {
  const { data, error } = await reader.GET("/runs/{key}", { params: { path: { key } } });
  check(error === undefined && data !== undefined, "run not read", error);
  check(data.idempotency_key === key && data.max_attempts === 2, "run detail", data);
  check(data.history.length === 0, "no attempt finished yet", data.history);
}

async function refusals(): Promise<void> {
  const forbidden = await reader.POST("/schedules/{id}/trigger", {
    params: { path: { id: "ts-tour-hourly" } },
    body: { request_id: "ts-tour-reader" },
  });
  check(forbidden.data === undefined && forbidden.error !== undefined, "a reader triggered");
  const problem = forbidden.error;
  check(forbidden.response.status === 403 && problem.status === 403, "403", problem);

  const invalid = await deployer.PUT("/workflows/{id}/versions/{version}", {
    params: { path: { id: WORKFLOW, version: 2 } },
    body: {
      dag: { nodes: [{ id: "only" }] },
      schedules: [{ user_id: "carol", cron_expr: "61 * * * *", timezone: "UTC" }],
    },
  });
  check(invalid.error !== undefined && invalid.response.status === 400, "400", invalid.data);
  const fields = (invalid.error.errors ?? []).map((e) => e.field);
  check(fields.length === 1 && (fields[0] ?? "").endsWith("cron_expr"), "the field named", fields);
}

/** Never called: what the generated types must refuse, checked by the compiler alone. */
export function refusedByTheTypes(): DeploySchedule[] {
  return [
    // @ts-expect-error user_id is required.
    { cron_expr: "0 * * * *", timezone: "UTC" },
    // @ts-expect-error overlap_policy is one of the documented policies.
    { user_id: "u", cron_expr: "0 * * * *", timezone: "UTC", overlap_policy: "sometimes" },
    // @ts-expect-error a schedule takes no field the document does not declare.
    { user_id: "u", cron_expr: "0 * * * *", timezone: "UTC", color: "blue" },
  ];
}

const steps: [string, () => Promise<unknown>][] = [
  ["deploy a workflow with a schedule", deploy],
  ["read the schedule", readSchedule],
];
let triggered = "";
steps.push(["trigger a run", async () => (triggered = await trigger())]);
steps.push(["read the run", () => readRun(triggered)]);
steps.push(["refusals are declared problems", refusals]);

for (const [name, step] of steps) {
  try {
    await step();
    console.log(`ok ${name}`);
  } catch (error) {
    console.log(`FAILED ${name}`);
    console.log(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  }
}
console.log(`tour complete: ${steps.length} steps`);
