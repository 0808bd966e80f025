"""An operator's tour of kairos through a client generated from its OpenAPI document.

Written the way a new user would: only the generated package `kairos_client` talks to the
server (no hand-written HTTP), every client raises on a status the document does not declare
(`raise_on_unexpected_status=True`), and every answer is parsed into the generated models,
so a missing required field, an enum value or a timestamp the document does not allow fails
the parse. Each parsed answer must also carry no field the document leaves undeclared.
Before any call the tour checks the shape of the generated code: each nullable enum of the
document is one class, and every operation takes a plain `Client` as well as an
`AuthenticatedClient`.

Environment: KAIROS_URL (the server) and `kairos_client` importable, then either
KAIROS_DEPLOYER_TOKEN, KAIROS_EXECUTOR_TOKEN and KAIROS_READER_TOKEN (bearer tokens of those
roles, for a server with auth on), or KAIROS_AUTH_MODE=none (for a server with
`auth.mode = none`): every call then goes through a plain `Client` with no credentials, and
the refusals of a role or of a bad token are not part of the tour.
Each step prints one line; the first failure prints its traceback and exits 1.
"""

from __future__ import annotations

import datetime as dt
import enum
import importlib
import inspect
import os
import pkgutil
import sys
import time
import traceback
import typing
from pathlib import Path
from typing import Any, TypeVar

import attrs
import kairos_client.api
import kairos_client.models
from kairos_client import AuthenticatedClient, Client
from kairos_client.api.default import (
    backfill_schedule,
    cancel_run,
    delete_calendar,
    get_calendar,
    get_run,
    get_schedule,
    get_workflow_version,
    list_calendars,
    list_dead_letters,
    list_runs,
    list_schedules,
    pause_schedule,
    preview_spec,
    put_calendar,
    put_workflow_version,
    report_run_status,
    retry_run,
    trigger_schedule,
    upsert_schedule,
)
from kairos_client.models import (
    BackfillScheduleBody,
    BackfillScheduleResponse200,
    Calendar,
    CancelRunBody,
    CancelRunResponse200,
    CancelRunResponse200Cancel,
    CatchupPolicy,
    DagNode,
    DeployAnswer,
    DeploySchedule,
    DryRunAnswer,
    DryRunAnswerSchedulesItemChange,
    DstFold,
    DstGap,
    GetWorkflowVersionResponse200,
    KairosWorkflowDAG,
    ListCalendarsResponse200,
    ListDeadLettersResponse200,
    ListRunsResponse200,
    ListSchedulesResponse200,
    OverlapPolicy,
    PauseScheduleBody,
    PreviewSpecBody,
    PreviewSpecResponse200,
    Problem,
    PutCalendarBody,
    PutCalendarResponse200,
    PutCalendarResponse201,
    PutWorkflowVersionBody,
    ReportRunStatusBody,
    ReportRunStatusBodyStatus,
    RetryRunBody,
    Roll,
    Run,
    RunSource,
    RunStatus,
    RunWithAttempts,
    Schedule,
    ScheduleStatsLastNotLaunchedType1,
    ScheduleStatsLastNotLaunchedType1Status,
    TriggerScheduleBody,
    UpsertRequest,
    UpsertResult,
    UpsertResultOutcome,
)
from kairos_client.types import UNSET, Response, Unset

T = TypeVar("T")

URL = os.environ["KAIROS_URL"]
AUTH_OFF = os.environ.get("KAIROS_AUTH_MODE") == "none"


def client_of(role: str) -> AuthenticatedClient | Client:
    """The client a caller of `role` uses: a plain one where the server checks no token."""
    if AUTH_OFF:
        return Client(base_url=URL, raise_on_unexpected_status=True)
    token = os.environ[f"KAIROS_{role.upper()}_TOKEN"]
    return AuthenticatedClient(base_url=URL, token=token, raise_on_unexpected_status=True)


deployer = client_of("deployer")
executor = client_of("executor")
reader = client_of("reader")
stranger = AuthenticatedClient(
    base_url=URL, token="not-a-token-of-this-server", raise_on_unexpected_status=True
)

# Models whose schema admits fields of the caller's own (the DAG and its nodes).
OPEN_MODELS = (KairosWorkflowDAG, DagNode)
# Undeclared fields found so far: the tour goes on, and fails at the end if there are any.
UNDECLARED: list[str] = []
CURRENT_STEP = [""]


def declared_only(value: Any, where: str) -> None:
    """Records each parsed model (at any depth) that holds fields its schema does not declare."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            declared_only(item, f"{where}[{i}]")
    elif attrs.has(type(value)):
        extra = getattr(value, "additional_properties", {})
        if extra and not isinstance(value, OPEN_MODELS):
            UNDECLARED.append(
                f"{CURRENT_STEP[0]}: {where} ({type(value).__name__}) carries fields the document "
                f"does not declare: {sorted(extra)}"
            )
        for field in attrs.fields(type(value)):
            if field.name != "additional_properties":
                declared_only(getattr(value, field.name), f"{where}.{field.name}")


def expect(response: Response[Any], status: int, model: type[T]) -> T:
    """The parsed answer, after checking its status and its model (and noting undeclared
    fields)."""
    body = response.content.decode(errors="replace")
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {body}"
    assert isinstance(response.parsed, model), (
        f"expected a {model.__name__}, parsed {type(response.parsed).__name__}: {body}"
    )
    declared_only(response.parsed, model.__name__)
    return response.parsed


def expect_empty(response: Response[Any], status: int = 204) -> None:
    body = response.content.decode(errors="replace")
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {body}"
    assert response.content == b"", f"expected no body: {body}"


def present(value: T | Unset) -> T:
    assert not isinstance(value, Unset), "a field the answer should carry is absent"
    return value


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def poll_run(key: str, wanted: RunStatus, seconds: float = 20.0) -> RunWithAttempts:
    """GET /runs/{key} until the run is `wanted`."""
    deadline = time.monotonic() + seconds
    while True:
        run = expect(get_run.sync_detailed(key, client=reader), 200, RunWithAttempts)
        if run.status == wanted:
            return run
        assert time.monotonic() < deadline, f"run {key} still {run.status}, not {wanted}"
        time.sleep(0.2)


STEPS: list[tuple[str, Any]] = []


def step(function: Any) -> Any:
    STEPS.append((function.__name__, function))
    return function


@step
def each_nullable_enum_is_one_class() -> None:
    models = Path(kairos_client.models.__file__).parent
    # A nullable enum written inline comes out as a class per union member
    # (`..._type_1`, `..._type_2_type_1`, `..._type_3_type_1`).
    nested = sorted(p.name for p in models.glob("*_type_*_type_*.py"))
    assert nested == [], f"nested union classes: {nested}"
    classes: dict[frozenset[str], list[str]] = {}
    for name in dir(kairos_client.models):
        value = getattr(kairos_client.models, name)
        if isinstance(value, type) and issubclass(value, enum.Enum):
            classes.setdefault(frozenset(m.value for m in value), []).append(name)
    for cls, module in [
        (OverlapPolicy, "overlap_policy"),
        (CatchupPolicy, "catchup_policy"),
        (Roll, "roll"),
        (DstGap, "dst_gap"),
        (DstFold, "dst_fold"),
    ]:
        values = frozenset(m.value for m in cls)
        assert classes[values] == [cls.__name__], f"{sorted(values)}: {classes[values]}"
        files = sorted(p.name for p in models.glob(f"*{module}*.py"))
        assert files == [f"{module}.py"], files
    assert {m.value for m in OverlapPolicy} == {
        "allow",
        "skip",
        "queue",
        "buffer_one",
        "cancel_other",
    }


@step
def every_operation_takes_a_plain_client() -> None:
    checked = 0
    for package in pkgutil.iter_modules(kairos_client.api.__path__):
        tag = importlib.import_module(f"kairos_client.api.{package.name}")
        for info in pkgutil.iter_modules(tag.__path__):
            module = importlib.import_module(f"{tag.__name__}.{info.name}")
            for name in ("sync_detailed", "sync", "asyncio_detailed", "asyncio"):
                function = getattr(module, name, None)
                if function is None:
                    continue
                annotation = inspect.signature(function).parameters["client"].annotation
                accepted = set(typing.get_args(annotation)) or {annotation}
                assert accepted == {AuthenticatedClient, Client}, (
                    f"{module.__name__}.{name} takes client: {annotation}"
                )
                checked += 1
    assert checked > 100, f"only {checked} operations"


WORKFLOW = "nightly-report"
DAG = KairosWorkflowDAG.from_dict(
    {
        "nodes": [
            {"id": "extract", "action": "extract.py", "image": "etl:3"},
            {"id": "load", "action": "load.py", "depends_on": ["extract"]},
        ]
    }
)
DEPLOYED = [
    DeploySchedule(
        schedule_id="nightly-daily",
        user_id="alice",
        cron_expr="0 3 * * *",
        timezone="UTC",
    ),
    DeploySchedule(
        schedule_id="nightly-berlin",
        user_id="alice",
        cron_expr="*/30 8-18 * * MON-FRI",
        timezone="Europe/Berlin",
        max_attempts=3,
        retry_intervals_s=[60, 300],
    ),
]
FLAKY = "nightly-flaky"
CALENDAR = "closing-days"
state: dict[str, Any] = {}


@step
def deploy_workflow_with_schedules() -> None:
    body = PutWorkflowVersionBody(dag=DAG, schedules=DEPLOYED)
    answer = expect(
        put_workflow_version.sync_detailed(WORKFLOW, 1, client=deployer, body=body),
        201,
        DeployAnswer,
    )
    assert answer.workflow_id == WORKFLOW and answer.version == 1 and answer.created
    assert sorted(s.schedule_id for s in answer.schedules) == ["nightly-berlin", "nightly-daily"]
    assert all(s.revision == 1 for s in answer.schedules), answer.schedules
    assert answer.removed == []
    stored = expect(
        get_workflow_version.sync_detailed(WORKFLOW, 1, client=reader),
        200,
        GetWorkflowVersionResponse200,
    )
    assert stored.dag.to_dict() == DAG.to_dict(), stored.dag.to_dict()


@step
def deploy_again_as_dry_run() -> None:
    body = PutWorkflowVersionBody(dag=DAG, schedules=DEPLOYED)
    answer = expect(
        put_workflow_version.sync_detailed(WORKFLOW, 1, client=deployer, body=body, dry_run=True),
        200,
        DryRunAnswer,
    )
    assert answer.dry_run is True and answer.workflow_created is False
    changes = {present(s.schedule_id): present(s.change) for s in answer.schedules}
    assert changes == {
        "nightly-daily": DryRunAnswerSchedulesItemChange.UNCHANGED,
        "nightly-berlin": DryRunAnswerSchedulesItemChange.UNCHANGED,
    }, changes


@step
def upsert_a_schedule() -> None:
    request = UpsertRequest(
        schedule_id=FLAKY,
        workflow_id=WORKFLOW,
        version=1,
        user_id="bob",
        cron_expr="0 0 1 1 *",
        timezone="America/New_York",
        max_attempts=1,
        overlap_policy=OverlapPolicy.SKIP,
        dst_gap=DstGap.SHIFT,
    )
    created = expect(
        upsert_schedule.sync_detailed(client=deployer, body=request), 201, UpsertResult
    )
    assert created.schedule_id == FLAKY and created.revision == 1
    assert created.outcome == UpsertResultOutcome.CREATED, created.outcome
    assert isinstance(created.next_run_at, dt.datetime) and created.next_run_at.month == 1
    again = expect(upsert_schedule.sync_detailed(client=deployer, body=request), 200, UpsertResult)
    assert again.revision == 1, "an identical upsert writes nothing"
    assert again.outcome == UpsertResultOutcome.UNCHANGED, again.outcome
    stored = expect(get_schedule.sync_detailed(FLAKY, client=reader), 200, Schedule)
    assert stored.overlap_policy == OverlapPolicy.SKIP.value, stored.overlap_policy
    assert stored.dst_gap == DstGap.SHIFT and stored.roll == Roll.NONE, (
        stored.dst_gap,
        stored.roll,
    )


@step
def get_a_schedule_with_explain() -> None:
    schedule = expect(
        get_schedule.sync_detailed("nightly-berlin", client=reader, explain=True), 200, Schedule
    )
    assert schedule.workflow_id == WORKFLOW and schedule.timezone == "Europe/Berlin"
    assert schedule.max_attempts == 3 and schedule.retry_intervals_s == [60, 300]
    assert schedule.paused is False and schedule.pause_note is None
    preview = present(schedule.preview)
    assert len(preview) == 5 and preview == sorted(preview), preview
    # The planner writes runs ahead, so next_run_at may already be the tick after the first.
    assert schedule.next_run_at in preview[:2], (schedule.next_run_at, preview)
    ticks = present(schedule.explained_preview)
    assert [t.at for t in ticks] == preview
    assert all(t.utc_offset in ("+01:00", "+02:00") for t in ticks), [t.utc_offset for t in ticks]
    present(schedule.stats)


@step
def list_schedules_a_page_at_a_time() -> None:
    seen: list[str] = []
    cursor: str | Unset = UNSET
    pages = 0
    while True:
        page = expect(
            list_schedules.sync_detailed(client=reader, limit=1, cursor=cursor),
            200,
            ListSchedulesResponse200,
        )
        pages += 1
        assert len(page.schedules) <= 1
        seen += [s.schedule_id for s in page.schedules]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        assert pages < 20, "paging does not end"
    assert pages >= 2, pages
    assert seen == ["nightly-berlin", "nightly-daily", "nightly-flaky"], seen


@step
def preview_a_spec() -> None:
    body = PreviewSpecBody(
        cron_expr="30 2 * * *",
        timezone="America/New_York",
        after=utc("2025-03-08T12:00:00Z"),
        count=3,
        explain=True,
    )
    answer = expect(
        preview_spec.sync_detailed(client=reader, body=body), 200, PreviewSpecResponse200
    )
    assert answer.fire_times == [
        utc("2025-03-09T07:00:00Z"),
        utc("2025-03-10T06:30:00Z"),
        utc("2025-03-11T06:30:00Z"),
    ], answer.fire_times
    ticks = present(answer.ticks)
    assert [t.wall_time for t in ticks] == [
        "2025-03-09T03:00:00",
        "2025-03-10T02:30:00",
        "2025-03-11T02:30:00",
    ], ticks
    assert [t.utc_offset for t in ticks] == ["-04:00"] * 3, ticks
    explained = present(answer.explained)
    assert [e.at for e in explained] == [utc("2025-03-09T07:00:00Z")], explained
    dst = present(explained[0].dst)
    assert present(dst.rule) == "dst_gap=shift" and present(dst.wall_time) == "2025-03-09T02:30:00"


@step
def pause_with_a_note() -> None:
    body = PauseScheduleBody(schedule_id="nightly-berlin", paused=True, note="vendor outage")
    expect_empty(pause_schedule.sync_detailed(client=deployer, body=body))
    schedule = expect(get_schedule.sync_detailed("nightly-berlin", client=reader), 200, Schedule)
    assert schedule.paused is True and schedule.pause_note == "vendor outage"
    paused = expect(
        list_schedules.sync_detailed(client=reader, paused=True), 200, ListSchedulesResponse200
    )
    assert [s.schedule_id for s in paused.schedules] == ["nightly-berlin"]


@step
def resume() -> None:
    body = PauseScheduleBody(schedule_id="nightly-berlin", paused=False)
    expect_empty(pause_schedule.sync_detailed(client=deployer, body=body))
    schedule = expect(get_schedule.sync_detailed("nightly-berlin", client=reader), 200, Schedule)
    assert schedule.paused is False and schedule.pause_note is None
    assert schedule.next_run_at is not None


@step
def trigger_a_run() -> None:
    body = TriggerScheduleBody(request_id="tour-trigger-1")
    run = expect(
        trigger_schedule.sync_detailed("nightly-daily", client=deployer, body=body), 201, Run
    )
    assert run.schedule_id == "nightly-daily" and run.source == RunSource.MANUAL
    assert run.workflow_id == WORKFLOW and run.version == 1 and run.user_id == "alice"
    again = expect(
        trigger_schedule.sync_detailed("nightly-daily", client=deployer, body=body), 200, Run
    )
    assert again.idempotency_key == run.idempotency_key, "the same request id is the same run"
    state["triggered"] = run.idempotency_key


@step
def backfill_a_range() -> None:
    day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day - dt.timedelta(days=30)
    body = BackfillScheduleBody(from_=start, to=start + dt.timedelta(days=2, hours=12))
    answer = expect(
        backfill_schedule.sync_detailed("nightly-daily", client=deployer, body=body),
        200,
        BackfillScheduleResponse200,
    )
    assert (answer.ticks, answer.created, answer.already_present) == (3, 3, 0), answer
    again = expect(
        backfill_schedule.sync_detailed("nightly-daily", client=deployer, body=body),
        200,
        BackfillScheduleResponse200,
    )
    assert (again.ticks, again.created, again.already_present) == (3, 0, 3), again
    state["backfilled"] = [start + dt.timedelta(days=d, hours=3) for d in range(3)]


@step
def list_a_schedules_runs_a_page_at_a_time() -> None:
    runs: list[Run] = []
    cursor: str | Unset = UNSET
    pages = 0
    while True:
        page = expect(
            list_runs.sync_detailed("nightly-daily", client=reader, limit=1, cursor=cursor),
            200,
            ListRunsResponse200,
        )
        pages += 1
        assert len(page.runs) <= 1
        runs += page.runs
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        assert pages < 50, "paging does not end"
    assert pages >= 2, pages
    keys = [r.idempotency_key for r in runs]
    assert len(set(keys)) == len(keys), f"a run on two pages: {keys}"
    ticks = [r.run_at for r in runs]
    assert ticks == sorted(ticks, reverse=True), f"not newest tick first: {ticks}"
    assert state["triggered"] in keys
    backfilled = [r for r in runs if r.source == RunSource.BACKFILL]
    assert sorted(r.run_at for r in backfilled) == state["backfilled"], backfilled
    state["backfilled_runs"] = {r.run_at: r.idempotency_key for r in backfilled}


@step
def cancel_a_run() -> None:
    key = state["backfilled_runs"][max(state["backfilled"])]
    body = CancelRunBody(reason="not needed after all")
    answer = expect(
        cancel_run.sync_detailed(key, client=deployer, body=body), 200, CancelRunResponse200
    )
    assert answer.idempotency_key == key
    # The newest backfilled tick waits behind older runs (queue), so it was never published.
    assert answer.cancel == CancelRunResponse200Cancel.CANCELLED, answer.cancel
    assert answer.status == RunStatus.CANCELLED, answer.status
    again = expect(cancel_run.sync_detailed(key, client=deployer), 200, CancelRunResponse200)
    assert again.cancel == CancelRunResponse200Cancel.ALREADY_FINISHED, again.cancel


@step
def run_detail() -> None:
    key = state["backfilled_runs"][max(state["backfilled"])]
    run = expect(get_run.sync_detailed(key, client=reader), 200, RunWithAttempts)
    assert run.idempotency_key == key and run.status == RunStatus.CANCELLED
    assert run.source == RunSource.BACKFILL and run.max_attempts == 1
    assert run.reason is not None and "not needed after all" in run.reason, run.reason
    assert isinstance(run.history, list)
    schedule = expect(get_schedule.sync_detailed("nightly-daily", client=reader), 200, Schedule)
    stats = present(schedule.stats)
    assert isinstance(stats.last_not_launched, ScheduleStatsLastNotLaunchedType1), stats
    assert stats.last_not_launched.run_at == max(state["backfilled"])
    assert stats.last_not_launched.status == ScheduleStatsLastNotLaunchedType1Status.CANCELLED
    assert stats.why is not None and stats.why.startswith("CANCELLED"), stats.why


@step
def dead_letter_a_run_through_the_executor() -> None:
    body = TriggerScheduleBody(request_id="tour-flaky-1")
    run = expect(trigger_schedule.sync_detailed(FLAKY, client=deployer, body=body), 201, Run)
    key = run.idempotency_key
    poll_run(key, RunStatus.ENQUEUED)
    report = ReportRunStatusBody(
        status=ReportRunStatusBodyStatus.FAILED,
        executor_id="tour-executor",
        run_id="tour-run-1",
        error="disk full",
    )
    failed = expect(report_run_status.sync_detailed(key, client=executor, body=report), 200, Run)
    assert failed.status == RunStatus.FAILED and failed.last_error == "disk full", failed
    assert failed.dead_lettered_at is not None, "the last attempt failed: a dead letter"
    state["dead"] = key


@step
def list_dead_letters_a_page_at_a_time() -> None:
    page = expect(
        list_dead_letters.sync_detailed(client=reader, schedule_id=FLAKY, limit=1),
        200,
        ListDeadLettersResponse200,
    )
    runs = present(page.runs)
    assert [r.idempotency_key for r in runs] == [state["dead"]], runs
    assert present(page.next_cursor) is None
    everywhere = expect(
        list_dead_letters.sync_detailed(client=reader, workflow_id=WORKFLOW),
        200,
        ListDeadLettersResponse200,
    )
    assert [r.idempotency_key for r in present(everywhere.runs)] == [state["dead"]]


@step
def retry_the_dead_letter() -> None:
    key = state["dead"]
    body = RetryRunBody(request_id="tour-retry-1")
    run = expect(retry_run.sync_detailed(key, client=deployer, body=body), 201, Run)
    assert run.idempotency_key == key and run.attempt == 2, run
    assert run.status in (RunStatus.PENDING, RunStatus.RETRYING, RunStatus.ENQUEUED), run.status
    again = expect(retry_run.sync_detailed(key, client=deployer, body=body), 200, Run)
    assert again.attempt == 2, "the same request id adds no attempt"
    detail = expect(get_run.sync_detailed(key, client=reader), 200, RunWithAttempts)
    assert [a.attempt for a in detail.history] == [1], detail.history
    assert detail.history[0].error == "disk full"


@step
def calendars() -> None:
    body = PutCalendarBody(
        dates=[dt.date(2026, 12, 24), dt.date(2026, 12, 31)], description="year-end closing"
    )
    created = expect(
        put_calendar.sync_detailed(CALENDAR, client=deployer, body=body),
        201,
        PutCalendarResponse201,
    )
    assert created.name == CALENDAR and created.revision == 1
    assert created.dates == [dt.date(2026, 12, 24), dt.date(2026, 12, 31)]
    assert created.replanned == []
    same = expect(
        put_calendar.sync_detailed(CALENDAR, client=deployer, body=body),
        200,
        PutCalendarResponse200,
    )
    assert same.revision == 2 and same.dates == created.dates, "a PUT replaces the calendar"
    got = expect(get_calendar.sync_detailed(CALENDAR, client=reader), 200, Calendar)
    assert got.description == "year-end closing" and got.dates == created.dates
    listed = expect(list_calendars.sync_detailed(client=reader), 200, ListCalendarsResponse200)
    assert [c.name for c in listed.calendars] == [CALENDAR]
    expect_empty(delete_calendar.sync_detailed(CALENDAR, client=deployer))
    gone = expect(get_calendar.sync_detailed(CALENDAR, client=reader), 404, Problem)
    assert gone.status == 404
    empty = expect(list_calendars.sync_detailed(client=reader), 200, ListCalendarsResponse200)
    assert empty.calendars == []


@step
def refusals_are_declared_problems() -> None:
    if AUTH_OFF:
        # Every caller may do everything, whatever token it sends (or none).
        assert "Authorization" not in reader.get_httpx_client().headers
        assert not isinstance(reader, AuthenticatedClient)
    else:
        body = TriggerScheduleBody(request_id="tour-reader")
        refused = expect(
            trigger_schedule.sync_detailed("nightly-daily", client=reader, body=body),
            403,
            Problem,
        )
        assert refused.status == 403
        anonymous = expect(list_schedules.sync_detailed(client=stranger), 401, Problem)
        assert anonymous.status == 401
    unknown = expect(get_schedule.sync_detailed("no-such-schedule", client=reader), 404, Problem)
    assert unknown.status == 404
    invalid = UpsertRequest(
        workflow_id=WORKFLOW,
        version=1,
        user_id="bob",
        cron_expr="5/15 * * * *",
        timezone="Mars/Base",
    )
    bad = expect(upsert_schedule.sync_detailed(client=deployer, body=invalid), 400, Problem)
    fields = sorted(e.field for e in present(bad.errors))
    assert fields == ["cron_expr", "timezone"], fields


def main() -> int:
    for name, function in STEPS:
        CURRENT_STEP[0] = name
        started = time.monotonic()
        try:
            function()
        except Exception:
            print(f"FAILED {name}", flush=True)
            traceback.print_exc(file=sys.stdout)
            return 1
        print(f"ok {name} ({time.monotonic() - started:.2f} s)", flush=True)
    if UNDECLARED:
        print("FAILED: answers carry fields the document does not declare:")
        for finding in UNDECLARED:
            print(f"  {finding}")
        return 1
    mode = "auth.mode = none, plain clients" if AUTH_OFF else "bearer tokens"
    print(f"tour complete: {len(STEPS)} steps ({mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
