/* agentensemble live dashboard: one vanilla ES2020 script, no dependencies, no build step.
 *
 * Layout of this file:
 *   1. helpers (time, formatting, escaping)
 *   2. the model: a fold over the server's messages (what state() exposes)
 *   3. the connection (WebSocket with resume, HTTP with the page's token)
 *   4. rendering, batched per animation frame (run list, header, review panel, flow graph,
 *      virtualized timeline, task detail)
 *   5. the test contract: window.__agentensemble
 */
(function () {
  'use strict';

  // ---------------------------------------------------------------- 1. helpers

  const ROW_H = 24;                 // timeline row height (px), fixed: the list is virtualized
  const OVERSCAN = 8;               // extra rows rendered above and below the viewport
  const MAX_TOOL_CALLS = 20;        // tool calls kept per task (what compaction keeps)
  const MAX_ITERATIONS = 5;         // llm iterations kept per task (what compaction keeps)
  const GROUP_THRESHOLD = 40;       // a graph layer with more nodes is drawn as one group node
  const GRID_ROWS = 20;             // an expanded big layer is drawn in columns of this many
  const STREAM_CAP = 100000;        // streamed characters kept per task (the tail)
  const TRUNCATE = 200;             // tool arguments/results shown before "show more"

  const STATUS_BY_EXIT = {
    COMPLETED: 'completed',
    USER_EXIT_EARLY: 'stopped early',
    TIMEOUT: 'timed out',
    BUDGET: 'over budget',
    PAUSED: 'paused',
    ERROR: 'failed',
    CANCELLED: 'cancelled',
  };

  // A task that ended because its run paused for a review did not fail: it runs again
  // (or resumes at its gate) when the run is resumed.
  const PAUSES = new Set(['RunPaused', 'ReviewNotAsked']);

  const $ = (id) => document.getElementById(id);

  function parseTime(v) {
    if (v == null) return null;
    if (typeof v === 'number') return v;
    let t = Date.parse(v);
    if (Number.isNaN(t)) t = Date.parse(String(v).replace(/(\.\d{3})\d+/, '$1'));
    return Number.isNaN(t) ? null : t;
  }

  function eventTime(m) {
    return m.timestamp ?? m.startedAt ?? m.completedAt ?? m.failedAt ?? m.sentAt ?? null;
  }

  function num(v) {
    return typeof v === 'number' && Number.isFinite(v) ? v : null;
  }

  /** A token count: null when unknown (absent or negative). */
  function tok(v) {
    return typeof v === 'number' && v >= 0 ? v : null;
  }

  function str(v) {
    return v == null ? null : String(v);
  }

  function esc(s) {
    return String(s ?? '').replace(/[&<>"']/g, (c) => (
      { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  }

  function pad2(n) { return n < 10 ? '0' + n : '' + n; }

  /** Durations: `340 ms`, `1.2 s`, `2m 05s`, `1h 02m`. */
  function fmtDur(ms) {
    if (ms == null || !Number.isFinite(ms)) return '—';
    if (ms < 0) ms = 0;
    if (ms < 1) return (Math.round(ms * 10) / 10) + ' ms';
    if (Math.round(ms) < 1000) return Math.round(ms) + ' ms';
    if (Math.round(ms / 100) < 600) return (Math.round(ms / 100) / 10).toFixed(1) + ' s';
    const totalS = Math.round(ms / 1000);
    if (totalS < 3600) return Math.floor(totalS / 60) + 'm ' + pad2(totalS % 60) + 's';
    const totalM = Math.floor(totalS / 60);
    return Math.floor(totalM / 60) + 'h ' + pad2(totalM % 60) + 'm';
  }

  function fmtAxis(ms) {
    if (ms <= 0) return '0';
    if (ms < 1000) return +ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
    if (ms < 60000) return +(ms / 1000).toFixed(2) + ' s';
    const s = Math.round(ms / 1000);
    return Math.floor(s / 60) + 'm' + (s % 60 ? ' ' + pad2(s % 60) + 's' : '');
  }

  /** A local clock time; the date too when it is not today. */
  function fmtClock(ms) {
    if (ms == null) return '—';
    const d = new Date(ms);
    const now = new Date();
    const hms = pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
    if (d.getFullYear() === now.getFullYear() && d.getMonth() === now.getMonth() &&
        d.getDate() === now.getDate()) return hms;
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' + hms;
  }

  function fmtInt(n) {
    if (n == null) return '—';
    return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  }

  function fmtCost(v, currency) {
    if (v == null) return '—';
    let s;
    if (v === 0) s = '0.00';
    else if (v >= 1) s = v.toFixed(2);
    else if (v >= 0.01) s = v.toFixed(3);
    else s = v.toPrecision(2);
    const cur = currency || 'USD';
    return cur === 'USD' ? '$' + s : s + ' ' + cur;
  }

  function truncate(s, n) {
    s = String(s ?? '');
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  function oneLine(s) {
    return String(s ?? '').replace(/\s+/g, ' ').trim();
  }

  // ---------------------------------------------------------------- 2. the model

  const M = {
    runs: new Map(),       // ensembleId -> run (internal shape, see newRun)
    order: [],             // ensembleIds, oldest first
    reviews: new Map(),    // reviewId -> pending review
    settings: {},
    mode: 'live',
    ready: false,
    clockOffset: 0,        // server clock minus local clock (ms)
    resumeCursors: null,   // cursors sent with `resume`, until `resumed` or `hello`
  };

  function serverNow() { return Date.now() + M.clockOffset; }

  function setting(name, fallback) {
    const v = M.settings && M.settings[name];
    return typeof v === 'number' && v >= 0 ? v : fallback;
  }
  /** What the server's snapshot keeps (hello.settings), so live and late pages agree. */
  function keptToolCalls() { return setting('toolCallsKept', MAX_TOOL_CALLS); }
  function keptIterations() { return setting('iterationsKept', MAX_ITERATIONS); }
  function detailedTasks() { const n = setting('detailedTasks', 0); return n > 0 ? n : Infinity; }

  function newRun(id) {
    return {
      ensembleId: id, name: null, workflow: null, status: 'running', exitReason: null,
      errorType: null, reason: null, startedAt: null, startMs: null, completedAt: null,
      endMs: null, durationMs: null, totalTasks: 0, plan: [], costCfg: null, inputs: null,
      totalToolCalls: null, tasks: new Map(), delegations: new Map(), maxSeq: 0, finished: [],
      lastEventMs: null, firstEventMs: null,
      counts: { top: 0, topDone: 0, topFailed: 0, all: 0, done: 0, failed: 0, running: 0, pending: 0 },
      structVer: 0, dataVer: 0, graphVer: 0, aggVer: -1, agg: null, orderVer: -1, order: null,
      cancelRequested: false,
    };
  }

  function newTask(id, m) {
    return {
      taskId: id, parentTaskId: m.parentTaskId != null ? String(m.parentTaskId) : null, taskIndex: num(m.taskIndex) ?? 0,
      description: m.taskDescription ?? '', agentRole: m.agentRole ?? '', name: null,
      state: 'running', planned: false, startedAt: null, startMs: null, completedAt: null,
      endMs: null, durationMs: null, output: null, parsedOutput: undefined, error: null,
      maxToolCallIndex: 0, toolCallsSeen: 0, completedToolCallCount: null, finished: false,
      trimmed: false, iterSeen: 0,
      finalIn: null, finalOut: null, liveIn: null, liveOut: null,
      toolCalls: [], recentIterations: [], expectedOutput: null, agentGoal: null,
      agentBackground: null, toolNames: null, systemPrompt: null, assembledContext: null,
      dependsOn: null, stream: '', streamVer: 0, liveIteration: null, modelName: null,
      firstMs: null, ver: 0,
    };
  }

  function countState(run, t, delta) {
    const c = run.counts;
    c.all += delta;
    if (t.state === 'completed') c.done += delta;
    else if (t.state === 'failed') c.failed += delta;
    else if (t.state === 'running') c.running += delta;
    else if (t.state === 'pending') c.pending += delta;
    if (!t.parentTaskId) {
      c.top += delta;
      if (t.state === 'completed') c.topDone += delta;
      else if (t.state === 'failed') c.topFailed += delta;
    }
  }

  function setTaskState(run, t, state) {
    if (t.state === state) return;
    countState(run, t, -1);
    t.state = state;
    countState(run, t, +1);
  }

  function addTask(run, t) {
    run.tasks.set(t.taskId, t);
    countState(run, t, +1);
    run.structVer++;
    run.graphVer++;
  }

  function removeTask(run, id) {
    const t = run.tasks.get(id);
    if (!t) return;
    countState(run, t, -1);
    run.tasks.delete(id);
    run.structVer++;
    run.graphVer++;
  }

  function addRun(id) {
    const run = newRun(id);
    M.runs.set(id, run);
    M.order.push(id);
    if (!loadingHello) evictRuns();
    hooks.runAdded(run);
    return run;
  }

  /** As the server does: when a new run appears and more than maxRetainedRuns are held,
   * the oldest go (whatever their state). Their pending reviews stay (the server keeps them). */
  function evictRuns() {
    const max = setting('maxRetainedRuns', 0);
    if (!(max > 0)) return;
    while (M.order.length > max) dropRun(M.order[0]);
  }

  function dropRun(id) {
    M.order = M.order.filter((x) => x !== id);
    M.runs.delete(id);
    hooks.runRemoved(id);
  }

  function planRowId(index) { return 'plan-' + index; }

  function ensureTask(run, m) {
    if (m.taskId == null || m.taskId === '') return null;
    const id = String(m.taskId);
    let t = run.tasks.get(id);
    if (!t) {
      t = newTask(id, m);
      t.firstMs = parseTime(eventTime(m));
      if (!t.parentTaskId) {
        const pid = planRowId(t.taskIndex);
        const planned = run.tasks.get(pid);
        if (planned && planned.planned) {
          t.dependsOn = planned.dependsOn;
          t.name = planned.name;
          removeTask(run, pid);
          hooks.taskReplaced(run, pid, t.taskId);
        }
      }
      addTask(run, t);
    }
    if (m.taskDescription != null && !t.description) t.description = m.taskDescription;
    if (m.agentRole != null && !t.agentRole) t.agentRole = m.agentRole;
    return t;
  }

  function normalizePlan(plan) {
    if (!Array.isArray(plan)) return [];
    return plan
      .filter((p) => p && num(p.taskIndex) != null)
      .map((p) => ({
        taskIndex: p.taskIndex,
        description: p.description ?? '',
        agentRole: p.agentRole ?? '',
        name: p.name ?? null,
        dependsOn: Array.isArray(p.dependsOn)
          ? p.dependsOn.filter((x) => num(x) != null).slice().sort((a, b) => a - b) : [],
      }))
      .sort((a, b) => a.taskIndex - b.taskIndex);
  }

  function maxTotal(run, m) {
    const n = num(m.totalTasks);
    if (n != null && n > run.totalTasks) run.totalTasks = n;
  }

  /** Folds one server message. Returns true when it changed something. */
  function fold(m, opts) {
    if (!m || typeof m !== 'object' || typeof m.type !== 'string') return false;
    switch (m.type) {
      case 'hello': foldHello(m); return true;
      case 'heartbeat':
        if (num(m.serverTimeMs) != null) M.clockOffset = m.serverTimeMs - Date.now();
        return false;
      case 'pong': return false;
      case 'error':
        if (m.message) hooks.serverError(String(m.message));
        return false;
      case 'resumed':
        M.resumeCursors = null;
        hooks.resumed();
        return false;
      default: return foldEvent(m, opts || {});
    }
  }

  function resetModel() {
    M.runs = new Map();
    M.order = [];
    M.reviews = new Map();
    M.resumeCursors = null;
  }

  let loadingHello = false;   // true while a hello is folded (the page renders once, after)

  function foldHello(h) {
    loadingHello = true;
    try { foldHelloRuns(h); } finally { loadingHello = false; }
    M.ready = true;
    api.ready = true;
    // for tests under the page's CSP (no eval): wait_for_selector('html[data-ready]')
    document.documentElement.setAttribute('data-ready', 'true');
    hooks.hello();
  }

  function foldHelloRuns(h) {
    resetModel();
    M.mode = h.mode === 'trace' ? 'trace' : 'live';
    M.settings = h.settings && typeof h.settings === 'object' ? h.settings : {};
    if (num(h.serverTimeMs) != null) M.clockOffset = h.serverTimeMs - Date.now();
    const runs = Array.isArray(h.runs) ? h.runs : [];
    for (const r of runs) {
      if (!r || r.ensembleId == null) continue;
      const id = String(r.ensembleId);
      if (!M.runs.has(id)) addRun(id);
      for (const m of (Array.isArray(r.messages) ? r.messages : [])) {
        if (m && m.ensembleId == null) m.ensembleId = id;
        foldEvent(m, { fromHello: true });
      }
    }
    const cursors = h.cursors && typeof h.cursors === 'object' ? h.cursors : {};
    for (const id of Object.keys(cursors)) {
      const run = M.runs.get(id);
      const c = num(cursors[id]);
      if (run && c != null && c > run.maxSeq) run.maxSeq = c;
    }
    for (const rv of (Array.isArray(h.reviews) ? h.reviews : [])) {
      foldEvent(Object.assign({ type: 'review_requested' }, rv), { fromHello: true });
    }
  }

  function foldEvent(m, opts) {
    if (!m || typeof m !== 'object' || m.ensembleId == null) return false;
    const id = String(m.ensembleId);
    const seq = num(m.seq);
    const seqEnd = num(m.lastSeq) ?? seq;
    // during a resume replay, anything at or below the cursor we sent was folded already
    if (M.resumeCursors && seqEnd != null && !opts.fromHello) {
      const c = M.resumeCursors[id];
      if (c != null && seqEnd <= c) return false;
    }
    let run = M.runs.get(id);
    if (!KNOWN_TYPES.has(m.type)) {
      // an event type this page does not know: ignored, but its seq counts as seen
      if (run && seqEnd != null && seqEnd > run.maxSeq) run.maxSeq = seqEnd;
      return false;
    }
    const ts = parseTime(eventTime(m));
    if (!run && (m.type === 'review_decided' || m.type === 'review_timed_out' ||
        (m.type === 'review_requested' && opts.fromHello))) {
      // a review of a run this page does not hold (the server keeps reviews of evicted runs)
      HANDLERS[m.type](null, m, ts, opts);
      if (!loadingHello) invalidate('review');
      return true;
    }
    if (!run) run = addRun(id);
    if (seqEnd != null && seqEnd > run.maxSeq) run.maxSeq = seqEnd;
    if (ts != null) {
      if (run.lastEventMs == null || ts > run.lastEventMs) run.lastEventMs = ts;
      if (run.firstEventMs == null || ts < run.firstEventMs) run.firstEventMs = ts;
    }
    run.dataVer++;
    const h = HANDLERS[m.type];
    const t = h(run, m, ts, opts);
    hooks.changed(run, t || null, m.type);
    return true;
  }

  const HANDLERS = {
    ensemble_started(run, m, ts) {
      run.name = m.name ?? null;
      run.workflow = m.workflow ?? null;
      run.startedAt = str(m.startedAt ?? m.timestamp);
      run.startMs = ts;
      maxTotal(run, m);
      run.costCfg = m.costConfiguration && typeof m.costConfiguration === 'object'
        ? m.costConfiguration : null;
      run.inputs = m.inputs && typeof m.inputs === 'object' ? m.inputs : null;
      run.plan = normalizePlan(m.plan);
      const topIdx = new Set();
      for (const t of run.tasks.values()) if (!t.parentTaskId && !t.planned) topIdx.add(t.taskIndex);
      for (const p of run.plan) {
        if (topIdx.has(p.taskIndex)) {
          for (const t of run.tasks.values()) {
            if (!t.parentTaskId && t.taskIndex === p.taskIndex) t.dependsOn = p.dependsOn;
          }
          continue;
        }
        const pid = planRowId(p.taskIndex);
        if (run.tasks.has(pid)) continue;
        const t = newTask(pid, { taskIndex: p.taskIndex, taskDescription: p.description, agentRole: p.agentRole });
        t.planned = true;
        t.state = 'pending';
        t.name = p.name;
        t.dependsOn = p.dependsOn;
        addTask(run, t);
      }
      run.graphVer++;
      run.structVer++;
      return null;
    },

    ensemble_completed(run, m, ts) {
      run.completedAt = str(m.completedAt ?? m.timestamp);
      run.endMs = ts;
      run.durationMs = num(m.durationMs);
      run.exitReason = m.exitReason ?? null;
      // as the server says it: a run ended by CancelledError was cancelled (the library
      // reports it as exitReason ERROR); an exit reason this page does not know is a failure
      run.status = m.errorType === 'CancelledError' ? 'cancelled'
        : STATUS_BY_EXIT[m.exitReason] || (m.exitReason ? 'failed' : 'completed');
      run.errorType = m.errorType ?? null;
      run.reason = m.reason ?? null;
      run.totalToolCalls = num(m.totalToolCalls);
      for (const [rid, r] of M.reviews) if (r.ensembleId === run.ensembleId) M.reviews.delete(rid);
      return null;
    },

    task_started(run, m, ts) {
      const t = ensureTask(run, m);
      if (!t) return null;
      if (t.startMs !== ts) run.structVer++;
      t.startedAt = str(m.startedAt ?? m.timestamp);
      t.startMs = ts;
      t.description = m.taskDescription ?? t.description;
      t.agentRole = m.agentRole ?? t.agentRole;
      if (m.parentTaskId != null) t.parentTaskId = String(m.parentTaskId);
      if (m.name != null) t.name = m.name;
      if (m.expectedOutput != null) t.expectedOutput = m.expectedOutput;
      if (!t.finished) setTaskState(run, t, 'running');
      maxTotal(run, m);
      t.ver++;
      return t;
    },

    task_input(run, m) {
      const t = ensureTask(run, m);
      if (!t) return null;
      t.expectedOutput = m.expectedOutput ?? t.expectedOutput;
      t.agentGoal = m.agentGoal ?? t.agentGoal;
      t.agentBackground = m.agentBackground ?? t.agentBackground;
      t.toolNames = Array.isArray(m.toolNames) ? m.toolNames.slice() : t.toolNames;
      t.systemPrompt = m.systemPrompt ?? t.systemPrompt;
      t.assembledContext = m.assembledContext ?? t.assembledContext;
      t.ver++;
      return t;
    },

    task_completed(run, m, ts) {
      const t = ensureTask(run, m);
      if (!t) return null;
      t.finished = true;
      setTaskState(run, t, 'completed');
      t.completedAt = str(m.completedAt ?? m.timestamp);
      t.endMs = ts;
      t.durationMs = num(m.durationMs);
      t.output = m.raw ?? null;
      t.parsedOutput = m.parsedOutput;
      t.error = null;
      t.completedToolCallCount = num(m.toolCallCount);
      t.finalIn = tok(m.inputTokens);
      t.finalOut = tok(m.outputTokens);
      t.hasFinal = true;
      t.stream = '';
      t.streamVer++;
      t.liveIteration = null;
      maxTotal(run, m);
      finishTask(run, t);
      t.ver++;
      return t;
    },

    task_failed(run, m, ts) {
      const t = ensureTask(run, m);
      if (!t) return null;
      t.finished = true;
      setTaskState(run, t, PAUSES.has(m.errorType) ? 'paused' : 'failed');
      t.completedAt = str(m.failedAt ?? m.completedAt ?? m.timestamp);
      t.endMs = ts;
      t.durationMs = num(m.durationMs);
      t.error = { errorType: m.errorType ?? null, reason: m.reason ?? null };
      t.stream = '';
      t.streamVer++;
      t.liveIteration = null;
      maxTotal(run, m);
      finishTask(run, t);
      t.ver++;
      return t;
    },

    llm_iteration_started(run, m) {
      const t = ensureTask(run, m);
      if (!t) return null;
      t.liveIteration = num(m.iterationIndex);
      if (m.modelName) t.modelName = m.modelName;
      t.ver++;
      return t;
    },

    llm_iteration_completed(run, m) {
      const t = ensureTask(run, m);
      if (!t) return null;
      const i = num(m.iterationIndex);
      if (i != null && i + 1 > t.iterSeen) t.iterSeen = i + 1;
      t.recentIterations.push({
        iterationIndex: i,
        responseType: m.responseType ?? null,
        inputTokens: tok(m.inputTokens),
        outputTokens: tok(m.outputTokens),
        latencyMs: num(m.latencyMs),
        taskIn: m.taskInputTokens !== undefined ? tok(m.taskInputTokens) : undefined,
        taskOut: m.taskOutputTokens !== undefined ? tok(m.taskOutputTokens) : undefined,
      });
      const keep = keptIterations();
      while (t.recentIterations.length > keep) t.recentIterations.shift();
      if (m.taskInputTokens !== undefined) t.liveIn = tok(m.taskInputTokens);
      if (m.taskOutputTokens !== undefined) t.liveOut = tok(m.taskOutputTokens);
      if (m.modelName) t.modelName = m.modelName;
      if (t.liveIteration === i) t.liveIteration = null;
      t.ver++;
      return t;
    },

    tool_called(run, m) {
      const t = ensureTask(run, m);
      if (!t) return null;
      t.toolCallsSeen++;
      const idx = num(m.toolCallIndex);
      if (idx != null && idx > t.maxToolCallIndex) t.maxToolCallIndex = idx;
      t.toolCalls.push({
        index: idx,
        toolName: m.toolName ?? null,
        arguments: m.toolArguments ?? null,
        result: m.toolResult ?? null,
        outcome: m.outcome ?? null,
        durationMs: num(m.durationMs),
      });
      const keep = keptToolCalls();
      while (t.toolCalls.length > keep) t.toolCalls.shift();
      t.ver++;
      return t;
    },

    token(run, m) {
      const t = ensureTask(run, m);
      if (!t || t.finished) return t;
      const piece = m.token == null ? '' : String(m.token);
      if (!piece) return t;
      t.stream += piece;
      if (t.stream.length > STREAM_CAP) t.stream = t.stream.slice(t.stream.length - STREAM_CAP);
      t.streamVer++;
      return t;
    },

    delegation_started(run, m) { return foldDelegation(run, m, 'running'); },
    delegation_completed(run, m) { return foldDelegation(run, m, 'completed'); },
    delegation_failed(run, m) { return foldDelegation(run, m, 'failed'); },

    review_requested(run, m, ts) {
      if (m.reviewId == null || (run && run.status !== 'running')) return null;
      const rid = String(m.reviewId);
      M.reviews.set(rid, {
        reviewId: rid, ensembleId: String(m.ensembleId), taskId: m.taskId ?? null,
        taskIndex: num(m.taskIndex), agentRole: m.agentRole ?? null,
        taskDescription: m.taskDescription ?? null, taskOutput: m.taskOutput ?? null,
        timing: m.timing ?? null, timeoutMs: num(m.timeoutMs), onTimeout: m.onTimeout ?? null,
        prompt: m.prompt ?? null, requiredRole: m.requiredRole ?? null,
        toolName: m.toolName ?? null, deadlineMs: num(m.deadlineMs),
        requestedMs: ts, seq: num(m.seq),
      });
      return null;
    },
    review_decided(run, m) {
      if (m.reviewId != null) M.reviews.delete(String(m.reviewId));
      return null;
    },
    review_timed_out(run, m) {
      if (m.reviewId != null) M.reviews.delete(String(m.reviewId));
      return null;
    },
    memory_operation() { return null; },
    guardrail_checked() { return null; },
  };
  const KNOWN_TYPES = new Set(Object.keys(HANDLERS));

  /** A delegation keeps what its latest message says (compaction keeps only that one). */
  function foldDelegation(run, m, status) {
    if (m.delegationId == null) return null;
    const id = String(m.delegationId);
    let d = run.delegations.get(id);
    if (!d) {
      d = { delegationId: id, descSeen: null, output: null };
      run.delegations.set(id, d);
      run.graphVer++;
    }
    d.from = m.delegatingAgentRole ?? null;
    d.to = m.workerRole ?? null;
    d.fromTaskId = m.taskId ?? null;
    d.taskDescription = m.taskDescription ?? null;
    if (m.taskDescription) d.descSeen = m.taskDescription;
    d.status = status;
    d.durationMs = num(m.durationMs);
    d.reason = m.reason ?? null;
    d.errorType = m.errorType ?? null;
    if (m.rawOutput != null) d.output = m.rawOutput;
    const parent = m.taskId != null ? run.tasks.get(String(m.taskId)) : null;
    if (parent) parent.ver++;
    return parent || null;
  }

  // ---- derived values (shared by state() and the page)

  // The state's derived values come from what the snapshot keeps (the last tool calls and
  // model calls, none for trimmed tasks), so a page that watched and a late page agree.
  function taskToolCallCount(t) {
    let kept = 0;
    for (const c of t.toolCalls) kept = Math.max(kept, c.index != null ? c.index : 0);
    if (!kept) kept = t.toolCalls.length;
    return Math.max(kept, t.completedToolCallCount ?? 0);
  }
  function taskIterations(t) {
    let n = 0;
    for (const r of t.recentIterations) if (r.iterationIndex != null && r.iterationIndex + 1 > n) n = r.iterationIndex + 1;
    return n;
  }
  function keptTaskTokens(t, key) {
    const its = t.recentIterations;
    for (let k = its.length - 1; k >= 0; k--) {
      const v = its[k][key];
      if (v === undefined) continue;
      // the server sums known counts only: 0 with no kept call reporting one is unknown
      const own = key === 'taskIn' ? 'inputTokens' : 'outputTokens';
      if (v === 0 && its.every((r) => r[own] == null)) return null;
      return v;
    }
    return null;
  }
  function taskIn(t) { return t.hasFinal ? t.finalIn : keptTaskTokens(t, 'taskIn'); }
  function taskOut(t) { return t.hasFinal ? t.finalOut : keptTaskTokens(t, 'taskOut'); }
  // what the page shows may be more than the state (a live page saw more)
  function uiToolCallCount(t) { return Math.max(taskToolCallCount(t), t.maxToolCallIndex || t.toolCallsSeen); }
  function uiIterations(t) { return Math.max(taskIterations(t), t.iterSeen); }
  function uiIn(t) { const v = taskIn(t); return v != null || t.hasFinal || !t.trimmed || !t.liveIn ? v : t.liveIn; }
  function uiOut(t) { const v = taskOut(t); return v != null || t.hasFinal || !t.trimmed || !t.liveOut ? v : t.liveOut; }

  /** A task ended: beyond the last `detailedTasks` finished ones, the oldest loses its tool
   * calls and model calls (as in the server's snapshot). */
  function finishTask(run, t) {
    run.finished.push(t.taskId);
    const limit = detailedTasks();
    while (run.finished.length > limit) {
      const old = run.tasks.get(run.finished.shift());
      if (old) { old.toolCalls = []; old.recentIterations = []; old.trimmed = true; old.ver++; }
    }
  }

  function costRates(run) {
    const c = run.costCfg;
    if (!c) return null;
    const i = Number(c.inputTokenRate);
    const o = Number(c.outputTokenRate);
    if (!Number.isFinite(i) || !Number.isFinite(o)) return null;
    return { i, o, currency: c.currency || 'USD' };
  }

  function taskCost(run, t) {
    const r = costRates(run);
    const a = taskIn(t);
    const b = taskOut(t);
    if (!r || (a == null && b == null)) return null;
    return round8((a ?? 0) * r.i + (b ?? 0) * r.o);
  }

  function round8(x) { return Math.round(x * 1e8) / 1e8; }

  function cmpTasks(a, b) {
    if (a.taskIndex !== b.taskIndex) return a.taskIndex - b.taskIndex;
    const sa = a.startMs ?? -Infinity;
    const sb = b.startMs ?? -Infinity;
    if (sa !== sb) return sa < sb ? -1 : 1;
    const xa = a.startedAt || '';
    const xb = b.startedAt || '';
    if (xa !== xb) return xa < xb ? -1 : 1;
    return a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0;
  }

  function sortedTasks(run) {
    return Array.from(run.tasks.values()).sort(cmpTasks);
  }

  /** Run aggregates (tokens, cost, tool calls), cached per data version. */
  function runAgg(run) {
    if (run.aggVer === run.dataVer && run.agg) return run.agg;
    const tasks = sortedTasks(run);
    const rates = costRates(run);
    let tokens = 0; let known = false; let cost = 0; let costKnown = false; let calls = 0;
    for (const t of tasks) {
      const a = taskIn(t); const b = taskOut(t);
      if (a != null || b != null) {
        known = true;
        tokens += (a ?? 0) + (b ?? 0);
        if (rates) { costKnown = true; cost += round8((a ?? 0) * rates.i + (b ?? 0) * rates.o); }
      }
      calls += taskToolCallCount(t);
    }
    run.agg = {
      tokens: known ? tokens : null,
      cost: costKnown ? round8(cost) : null,
      toolCalls: run.totalToolCalls != null ? run.totalToolCalls : calls,
      currency: rates ? rates.currency : null,
    };
    run.aggVer = run.dataVer;
    return run.agg;
  }

  /** Task counts for the page: a task index counts once, by its latest top-level execution. */
  function runCounts(run) {
    if (run.cntVer === run.dataVer && run.cnt) return run.cnt;
    const latest = new Map();
    let workers = 0;
    for (const t of run.tasks.values()) {
      if (t.parentTaskId) { workers++; continue; }
      const cur = latest.get(t.taskIndex);
      if (!cur || (cur.planned && !t.planned) || (!t.planned && (t.startMs ?? 0) >= (cur.startMs ?? 0))) latest.set(t.taskIndex, t);
    }
    let done = 0; let failed = 0; let running = 0;
    for (const t of latest.values()) {
      if (t.state === 'completed') done++;
      else if (t.state === 'failed') failed++;
      else if (t.state === 'running') running++;
    }
    run.cnt = { total: Math.max(run.totalTasks, latest.size), done, failed, running, workers };
    run.cntVer = run.dataVer;
    return run.cnt;
  }

  function taskState(run, t) {
    return {
      taskId: t.taskId,
      parentTaskId: t.parentTaskId,
      taskIndex: t.taskIndex,
      description: t.description,
      agentRole: t.agentRole,
      state: t.state,
      startedAt: t.startedAt,
      completedAt: t.completedAt,
      durationMs: t.durationMs,
      output: t.output,
      error: t.error ? { errorType: t.error.errorType, reason: t.error.reason } : null,
      toolCallCount: taskToolCallCount(t),
      inputTokens: taskIn(t),
      outputTokens: taskOut(t),
      iterations: taskIterations(t),
      toolCalls: t.toolCalls.map((c) => ({
        index: c.index, toolName: c.toolName, arguments: c.arguments, result: c.result,
        outcome: c.outcome, durationMs: c.durationMs,
      })),
      recentIterations: t.recentIterations.map((r) => ({
        iterationIndex: r.iterationIndex, responseType: r.responseType,
        inputTokens: r.inputTokens, outputTokens: r.outputTokens, latencyMs: r.latencyMs,
      })),
    };
  }

  function delegationState(run, d) {
    const worker = run.tasks.get(d.delegationId);
    return {
      delegationId: d.delegationId,
      from: d.from,
      to: d.to,
      fromTaskId: d.fromTaskId,
      taskDescription: (worker && worker.description) || d.taskDescription || null,
      status: d.status,
      durationMs: d.durationMs,
      reason: d.reason,
    };
  }

  function runState(run) {
    const agg = runAgg(run);
    const delegations = {};
    for (const id of Array.from(run.delegations.keys()).sort()) {
      delegations[id] = delegationState(run, run.delegations.get(id));
    }
    return {
      ensembleId: run.ensembleId,
      name: run.name,
      workflow: run.workflow,
      status: run.status,
      exitReason: run.exitReason,
      error: run.errorType || run.reason ? { errorType: run.errorType, reason: run.reason } : null,
      startedAt: run.startedAt,
      completedAt: run.completedAt,
      durationMs: run.durationMs,
      totalTasks: run.totalTasks,
      plan: run.plan.map((p) => ({
        taskIndex: p.taskIndex, description: p.description, agentRole: p.agentRole,
        name: p.name, dependsOn: p.dependsOn.slice(),
      })),
      tokens: agg.tokens,
      cost: agg.cost,
      toolCalls: agg.toolCalls,
      tasks: sortedTasks(run).map((t) => taskState(run, t)),
      delegations,
    };
  }

  function cmpReviews(a, b) {
    const x = a.requestedMs ?? 0; const y = b.requestedMs ?? 0;
    if (x !== y) return x - y;
    return a.reviewId < b.reviewId ? -1 : a.reviewId > b.reviewId ? 1 : 0;
  }

  function pendingReviews() {
    return Array.from(M.reviews.values()).sort(cmpReviews);
  }

  function snapshot() {
    return {
      runs: M.order.map((id) => runState(M.runs.get(id))),
      reviews: pendingReviews().map((r) => ({
        reviewId: r.reviewId, ensembleId: r.ensembleId, taskDescription: r.taskDescription,
        timing: r.timing, onTimeout: r.onTimeout, deadlineMs: r.deadlineMs,
      })),
    };
  }

  function cursors() {
    const c = {};
    for (const id of M.order) c[id] = M.runs.get(id).maxSeq;
    return c;
  }

  // ---------------------------------------------------------------- 3. the connection

  const query = new URLSearchParams(location.search);
  const TOKEN = query.get('token');

  const NET = {
    ws: null, backoff: 500, timer: null, open: false, everOpen: false, attempts: 0,
    lastMsgAt: 0, pingTimer: null, gotFirst: false,
  };

  function wsUrl(resume) {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams();
    if (resume) q.set('resume', '1');
    if (TOKEN) q.set('token', TOKEN);
    const qs = q.toString();
    return proto + '//' + location.host + '/ws' + (qs ? '?' + qs : '');
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    if (TOKEN) h.Authorization = 'Bearer ' + TOKEN;
    return h;
  }

  function connect() {
    NET.timer = null;
    const resume = M.ready;
    let ws;
    try {
      ws = new WebSocket(wsUrl(resume));
    } catch (e) {
      scheduleReconnect();
      return;
    }
    NET.ws = ws;
    NET.gotFirst = false;
    ws.onopen = () => {
      if (NET.ws !== ws) return;
      NET.open = true;
      NET.everOpen = true;
      NET.lastMsgAt = Date.now();
      if (resume && M.ready) {
        const c = cursors();
        M.resumeCursors = c;
        sendRaw({ type: 'resume', cursors: c });
      }
    };
    ws.onmessage = (ev) => {
      if (NET.ws !== ws) return;
      NET.lastMsgAt = Date.now();
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (!NET.gotFirst) {
        NET.gotFirst = true;
        NET.backoff = 500;
        setConn();
      }
      // a frame is one message or a JSON array of messages (the server batches)
      if (Array.isArray(m)) { for (const x of m) fold(x); } else fold(m);
    };
    ws.onclose = () => {
      if (NET.ws !== ws) return;
      NET.ws = null;
      NET.open = false;
      M.resumeCursors = null;
      setConn();
      scheduleReconnect();
    };
    ws.onerror = () => { /* a close follows */ };
  }

  function scheduleReconnect() {
    if (NET.timer) return;
    NET.attempts++;
    const delay = NET.backoff;
    NET.backoff = Math.min(NET.backoff * 2, 5000);
    NET.timer = setTimeout(connect, delay);
    setConn();
  }

  function sendRaw(obj) {
    api.sent.push(obj);
    if (api.sent.length > 100) api.sent.shift();
    if (NET.ws && NET.open) {
      try { NET.ws.send(JSON.stringify(obj)); return true; } catch (e) { return false; }
    }
    return false;
  }

  // keep-alive: a ping now and then; a socket silent for 45 s is taken for dead
  setInterval(() => {
    if (!NET.ws || !NET.open) return;
    if (Date.now() - NET.lastMsgAt > 45000) {
      try { NET.ws.close(4000, 'silent'); } catch (e) { /* ignore */ }
      return;
    }
    sendRaw({ type: 'ping' });
  }, 20000);

  function connText() {
    const live = NET.open && NET.gotFirst;
    if (M.mode === 'trace' && M.ready) return 'trace';
    if (live) return 'live';
    if (!NET.everOpen && NET.attempts === 0) return 'connecting…';
    return 'reconnecting…';
  }

  function setConn() { invalidate('conn'); }

  async function apiFetch(path, init) {
    const opts = Object.assign({}, init || {});
    opts.headers = authHeaders(opts.headers);
    opts.credentials = 'same-origin';
    return fetch(path, opts);
  }

  // ---------------------------------------------------------------- 4. rendering

  const UI = {
    selectedRun: null, manualRun: false,
    selectedTask: null, manualTask: false, autoTask: null,
    filter: '', stateFilter: 'all',
    expandedGroups: new Map(),    // ensembleId -> Set(layer)
    expandedText: new Set(),      // keys of "show more" toggles that are open
    openDetails: new Set(['out', 'stream']),   // <details> sections kept open
    graphCollapsed: false,
    reviewShown: null, reviewSent: null, reviewSentAt: 0,
    detailKey: null, detailStreamKey: null,
    graphKey: null, graphBuiltAt: 0, graphNodes: [], graphGroups: [],
    rowPool: [], tlOrderKey: null, tlRows: [], axisKey: null,
    listItems: new Map(),
    headerRun: null,
    lastRenderMs: 0,
  };

  const dirty = new Set();
  let rafId = 0;

  function invalidate(...what) {
    for (const w of what) dirty.add(w);
    if (!rafId) rafId = requestAnimationFrame(render);
  }

  const ALL = ['conn', 'list', 'header', 'review', 'graph', 'timeline', 'detail'];

  function render() {
    rafId = 0;
    const t0 = performance.now();
    const d = new Set(dirty);
    dirty.clear();
    try {
      if (d.has('conn')) renderConn();
      if (d.has('list')) renderRunList();
      if (d.has('header')) renderHeader();
      if (d.has('review')) renderReview();
      if (d.has('graph')) renderGraph();
      if (d.has('timeline')) renderTimeline();
      if (d.has('detail')) renderDetail();
    } catch (e) {
      console.error('dashboard render failed', e);
    }
    UI.lastRenderMs = performance.now() - t0;
  }

  function flush() {
    if (rafId) { cancelAnimationFrame(rafId); rafId = 0; }
    for (const w of ALL) dirty.add(w);
    render();
  }

  // hooks the model calls
  const hooks = {
    runAdded(run) {
      if (loadingHello) return;   // the hello hook picks the run
      if (!UI.manualRun || !M.runs.has(UI.selectedRun)) selectRun(run.ensembleId, false);
      invalidate('list');
    },
    runRemoved(id) {
      UI.expandedGroups.delete(id);
      if (UI.selectedRun === id) {
        UI.selectedRun = null;
        UI.manualRun = false;
        if (!loadingHello) pickDefaultRun();
      }
      invalidate('list', 'header', 'graph', 'timeline', 'detail', 'review');
    },
    taskReplaced(run, oldId, newId) {
      if (UI.selectedTask === oldId) UI.selectedTask = newId;
      if (UI.autoTask === oldId) UI.autoTask = newId;
    },
    changed(run, t, type) {
      if (loadingHello) return;
      invalidate('list');
      if (type.startsWith('review') || type === 'ensemble_completed') invalidate('review');
      if (run.ensembleId !== UI.selectedRun) return;
      invalidate('header', 'timeline', 'graph', 'detail');
    },
    hello() {
      // a reset keeps the user's pick when that run is still there, else shows the newest
      const before = UI.selectedRun;
      if (!UI.manualRun || !M.runs.has(UI.selectedRun)) {
        UI.manualRun = false;
        pickDefaultRun();
      }
      const run = M.runs.get(UI.selectedRun);
      if (!run || UI.selectedRun !== before || (UI.selectedTask && !run.tasks.has(UI.selectedTask))) {
        UI.selectedTask = null; UI.manualTask = false;
      }
      UI.autoTask = null;
      UI.graphKey = null; UI.tlOrderKey = null; UI.detailKey = null; UI.headerRun = null;
      // the review panel is rebuilt only if another review is shown (an edit in progress survives)
      invalidate(...ALL);
    },
    resumed() { NET.backoff = 500; invalidate('conn'); },
    serverError(text) { toast('Server: ' + text, true); },
  };

  function pickDefaultRun() {
    UI.selectedRun = M.order.length ? M.order[M.order.length - 1] : null;
  }

  function selectRun(id, manual) {
    if (UI.selectedRun !== id) {
      UI.selectedRun = id;
      UI.selectedTask = null; UI.manualTask = false; UI.autoTask = null;
      UI.graphKey = null; UI.tlOrderKey = null; UI.detailKey = null;
      const vp = $('tl-viewport');
      if (vp) vp.scrollTop = 0;
    }
    if (manual) UI.manualRun = id !== M.order[M.order.length - 1];
    invalidate(...ALL);
  }

  function selectTask(id, manual) {
    UI.selectedTask = id;
    UI.manualTask = !!manual && id != null;
    if (id == null) UI.autoTask = null;
    invalidate('timeline', 'graph', 'detail');
  }

  function currentRun() { return UI.selectedRun ? M.runs.get(UI.selectedRun) || null : null; }

  /** The task shown in the detail pane: the user's pick, else the latest running one. */
  function currentTaskId() {
    const run = currentRun();
    if (!run) return null;
    if (UI.manualTask && UI.selectedTask && run.tasks.has(UI.selectedTask)) return UI.selectedTask;
    if (UI.selectedTask && run.tasks.has(UI.selectedTask)) return UI.selectedTask;
    let best = null;
    if (run.counts.running > 0) {
      for (const t of run.tasks.values()) {
        if (t.state === 'running' && (best == null || (t.startMs ?? 0) >= (best.startMs ?? 0))) best = t;
      }
    }
    if (best) UI.autoTask = best.taskId;
    return UI.autoTask && run.tasks.has(UI.autoTask) ? UI.autoTask : null;
  }

  function runSpan(run) {
    let s = run.startMs ?? run.firstEventMs;
    if (s == null) return null;
    let e;
    if (run.status !== 'running') e = run.endMs ?? run.lastEventMs ?? s;
    else if (M.mode === 'trace') e = run.lastEventMs ?? s;   // a saved trace does not tick
    else e = Math.max(serverNow(), run.lastEventMs ?? s);
    if (run.durationMs != null && run.startMs != null && run.endMs == null) e = s + run.durationMs;
    if (e <= s) e = s + 1;
    return { s, e };
  }

  function runElapsed(run) {
    if (run.status !== 'running') {
      if (run.durationMs != null) return run.durationMs;
      if (run.endMs != null && run.startMs != null) return run.endMs - run.startMs;
      return null;
    }
    const s = run.startMs ?? run.firstEventMs;
    if (s == null) return null;
    if (M.mode === 'trace') return Math.max(0, (run.lastEventMs ?? s) - s);
    return Math.max(0, Math.max(serverNow(), run.lastEventMs ?? s) - s);
  }

  function runTitle(run) {
    return run.name || ('Run ' + run.ensembleId.slice(0, 8));
  }

  // ---- connection indicator

  function renderConn() {
    const el = $('connection');
    const text = connText();
    if (el.textContent !== text) el.textContent = text;
    const cls = 'conn ' + (text === 'live' ? 'conn-live' : text === 'trace' ? 'conn-trace'
      : text === 'connecting…' ? 'conn-connecting' : 'conn-reconnecting');
    if (el.className !== cls) el.className = cls;
    const note = $('mode-note');
    if (M.mode === 'trace' && M.ready) { note.hidden = false; note.textContent = 'viewing a saved trace'; }
    else note.hidden = true;
  }

  // ---- run list

  function renderRunList() {
    const list = $('run-list');
    const ids = M.order.slice().reverse();
    $('run-list-empty').hidden = ids.length > 0;
    $('run-count').textContent = ids.length ? String(ids.length) : '';
    const keep = new Set(ids);
    for (const [id, li] of UI.listItems) {
      if (!keep.has(id)) { li.remove(); UI.listItems.delete(id); }
    }
    let prev = null;
    for (const id of ids) {
      const run = M.runs.get(id);
      let li = UI.listItems.get(id);
      if (!li) {
        li = document.createElement('li');
        li.className = 'run-item';
        li.setAttribute('data-testid', 'run-item');
        li.setAttribute('data-ensemble-id', id);
        li.tabIndex = 0;
        li._sig = '';
        UI.listItems.set(id, li);
      }
      const c = runCounts(run);
      const total = c.total;
      const sig = [runTitle(run), run.status, run.workflow, c.done, c.failed, total,
        run.startMs, fmtDur(runElapsed(run)), UI.selectedRun === id].join('|');
      if (li._sig !== sig) {
        li._sig = sig;
        li.classList.toggle('sel', UI.selectedRun === id);
        li.setAttribute('aria-selected', UI.selectedRun === id ? 'true' : 'false');
        const st = statusClass(run.status);
        li.innerHTML =
          '<div class="ri-top"><span class="dot ' + st + '"></span>' +
          '<span class="ri-name" title="' + esc(run.ensembleId) + '">' + esc(runTitle(run)) + '</span>' +
          '<span class="ri-time">' + esc(fmtClock(run.startMs)) + '</span></div>' +
          '<div class="ri-sub"><span class="ri-status ' + st + '">' + esc(run.status) + '</span>' +
          (run.workflow ? '<span class="ri-wf">' + esc(run.workflow.toLowerCase()) + '</span>' : '') +
          '<span class="ri-dur">' + esc(fmtDur(runElapsed(run))) + '</span></div>' +
          '<div class="ri-prog"><span class="ri-bar"><span class="pg-done"></span><span class="pg-fail"></span></span>' +
          '<span class="ri-tasks">' + fmtInt(c.done) + '/' + fmtInt(total) +
          (c.failed ? ' <span class="fail-count">· ' + fmtInt(c.failed) + ' failed</span>' : '') + '</span></div>';
        // widths through the CSSOM: the page's CSP allows no inline style attributes
        li.querySelector('.pg-done').style.width = (total ? 100 * c.done / total : 0) + '%';
        li.querySelector('.pg-fail').style.width = (total ? 100 * c.failed / total : 0) + '%';
      }
      const want = prev ? prev.nextSibling : list.firstChild;
      if (want !== li) list.insertBefore(li, want);
      prev = li;
    }
  }

  function statusClass(status) {
    switch (status) {
      case 'running': return 'st-running';
      case 'completed': return 'st-completed';
      case 'failed': return 'st-failed';
      case 'cancelled': return 'st-cancelled';
      case 'stopped early': case 'over budget': case 'paused': return 'st-stopped';
      case 'timed out': return 'st-timeout';
      case 'pending': return 'st-pending';
      default: return 'st-other';
    }
  }

  // ---- run header

  function renderHeader() {
    const el = $('run-header');
    const run = currentRun();
    if (!run) {
      UI.headerRun = null;
      el.innerHTML = '<div class="empty-run"><div class="empty-title">' +
        (M.ready ? 'Waiting for a run to start…' : 'Connecting to the dashboard server…') +
        '</div><div class="muted">Runs of the attached ensemble appear here as they start.</div></div>';
      return;
    }
    if (UI.headerRun !== run.ensembleId || !el.querySelector('[data-testid="run-status"]')) {
      UI.headerRun = run.ensembleId;
      el.innerHTML =
        '<div class="rh-top">' +
        '<h1 class="rh-title" id="rh-title"></h1>' +
        '<span class="status" data-testid="run-status" id="rh-status"></span>' +
        '<span class="chip" id="rh-wf"></span>' +
        '<span class="muted small" id="rh-started"></span>' +
        '<span class="grow"></span>' +
        '<a class="btn btn-link" data-testid="run-trace" id="rh-trace" target="_blank" rel="noopener">Full trace ↗</a>' +
        '<button class="btn btn-danger" data-testid="run-cancel" id="rh-cancel" hidden>Cancel run</button>' +
        '</div>' +
        '<div class="rh-metrics">' +
        metric('Elapsed', 'run-elapsed') + metric('Tokens', 'run-tokens') +
        metric('Cost', 'run-cost') + metric('Tool calls', 'run-tool-calls') +
        metric('Tasks', 'run-tasks') +
        '<div class="rh-progress" title="tasks done"><span class="pg-done" id="rh-pg-done"></span><span class="pg-fail" id="rh-pg-fail"></span></div>' +
        '</div>' +
        '<div class="rh-error" id="rh-error" hidden></div>';
      $('rh-trace').href = '/api/runs/' + encodeURIComponent(run.ensembleId) +
        (TOKEN ? '?token=' + encodeURIComponent(TOKEN) : '');
    }
    setText('rh-title', runTitle(run));
    $('rh-title').title = run.ensembleId;
    const st = $('rh-status');
    setText('rh-status', run.status);
    const sc = 'status ' + statusClass(run.status);
    if (st.className !== sc) st.className = sc;
    setText('rh-wf', run.workflow ? run.workflow.toLowerCase() : '');
    $('rh-wf').hidden = !run.workflow;
    setText('rh-started', run.startMs != null ? 'started ' + fmtClock(run.startMs) : '');
    const agg = runAgg(run);
    setText('run-elapsed', fmtDur(runElapsed(run)));
    setText('run-tokens', agg.tokens == null ? '—' : fmtInt(agg.tokens));
    setText('run-cost', fmtCost(agg.cost, agg.currency));
    setText('run-tool-calls', fmtInt(agg.toolCalls));
    const c = runCounts(run);
    const total = c.total;
    setText('run-tasks', fmtInt(c.done) + ' / ' + fmtInt(total) +
      (c.failed ? ' · ' + fmtInt(c.failed) + ' failed' : '') +
      (c.workers > 0 ? ' · ' + fmtInt(c.workers) + ' delegated' : ''));
    $('rh-pg-done').style.width = (total ? (100 * c.done / total) : 0) + '%';
    $('rh-pg-fail').style.width = (total ? (100 * c.failed / total) : 0) + '%';
    const cancel = $('rh-cancel');
    const canCancel = run.status === 'running' && M.mode !== 'trace';
    cancel.hidden = !canCancel;
    cancel.disabled = run.cancelRequested;
    setText('rh-cancel', run.cancelRequested ? 'Cancelling…' : 'Cancel run');
    const err = $('rh-error');
    if (run.status === 'cancelled') {
      err.hidden = false;
      setText('rh-error', 'Cancelled: the outputs completed before the cancel are kept in the trace.');
    } else if (run.errorType || run.reason) {
      err.hidden = false;
      setText('rh-error', (run.errorType ? run.errorType + ': ' : '') + (run.reason || ''));
    } else err.hidden = true;
  }

  function metric(label, id) {
    return '<div class="metric"><span class="m-label">' + esc(label) + '</span>' +
      '<span class="m-value" data-testid="' + id + '" id="' + id + '"></span></div>';
  }

  function setText(id, text) {
    const el = typeof id === 'string' ? $(id) : id;
    if (el && el.textContent !== text) el.textContent = text;
  }

  async function cancelRun(run) {
    if (!run || run.cancelRequested) return;
    run.cancelRequested = true;
    invalidate('header');
    try {
      const res = await apiFetch('/api/runs/' + encodeURIComponent(run.ensembleId) + '/cancel',
        { method: 'POST' });
      if (!res.ok) throw new Error('HTTP ' + res.status);
      toast('Cancel requested');
    } catch (e) {
      run.cancelRequested = false;
      toast('Could not cancel the run (' + e.message + ')', true);
      invalidate('header');
    }
  }

  async function openTrace(run) {
    const win = window.open('', '_blank');
    try {
      const res = await apiFetch('/api/runs/' + encodeURIComponent(run.ensembleId));
      if (!res.ok) throw new Error('HTTP ' + res.status);
      const text = await res.text();
      let pretty = text;
      try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* as is */ }
      const url = URL.createObjectURL(new Blob([pretty], { type: 'application/json' }));
      if (win) win.location.href = url; else window.location.href = url;
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      if (win) win.close();
      toast('Could not load the trace (' + e.message + ')', true);
    }
  }

  let toastTimer = 0;
  function toast(text, isError) {
    const el = $('toast');
    el.textContent = text;
    el.className = 'toast' + (isError ? ' toast-error' : '');
    el.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { el.hidden = true; }, 4000);
  }

  // ---- review panel

  function renderReview() {
    const panel = $('review-panel');
    const pending = pendingReviews();
    if (!pending.length) {
      if (!panel.hidden) panel.hidden = true;
      UI.reviewShown = null;
      panel.innerHTML = '';
      return;
    }
    const r = pending[0];
    panel.hidden = false;
    if (UI.reviewShown !== r.reviewId) {
      UI.reviewShown = r.reviewId;
      UI.reviewSent = null;
      const run = M.runs.get(r.ensembleId);
      const timing = r.timing ? r.timing.replace(/_/g, ' ').toLowerCase() : '';
      panel.innerHTML =
        '<div class="rv-head">' +
        '<svg class="rv-icon" width="14" height="14" viewBox="0 0 16 16" aria-hidden="true"><circle cx="8" cy="8" r="7.2" fill="none" stroke="currentColor" stroke-width="1.6"/><rect x="5.3" y="4.6" width="1.9" height="6.8" rx=".5" fill="currentColor"/><rect x="8.8" y="4.6" width="1.9" height="6.8" rx=".5" fill="currentColor"/></svg>' +
        '<span class="rv-kicker">Review requested</span>' +
        '<span class="rv-count" data-testid="review-count"></span>' +
        (run && M.order.length > 1 ? '<button class="rv-run link" data-run="' + esc(r.ensembleId) + '">' + esc(runTitle(run)) + '</button>' : '') +
        '<span class="grow"></span>' +
        '<span class="rv-countdown" data-testid="review-countdown"></span>' +
        '</div>' +
        '<div class="rv-title" data-testid="review-title">' +
        (r.taskIndex != null ? '<span class="rv-idx">#' + esc(r.taskIndex) + '</span>' : '') +
        '<span>' + esc(oneLine(r.taskDescription) || 'Review') + '</span>' +
        (r.toolName ? '<span class="chip chip-tool">tool: ' + esc(r.toolName) + '</span>' : '') +
        (timing ? '<span class="chip">' + esc(timing) + '</span>' : '') +
        (r.requiredRole ? '<span class="rv-role" data-testid="review-role">for: ' + esc(r.requiredRole) + '</span>' : '') +
        '</div>' +
        (r.prompt ? '<div class="rv-prompt" data-testid="review-prompt">' + esc(r.prompt) + '</div>' : '') +
        '<textarea class="rv-text" data-testid="review-text" spellcheck="false" rows="3" aria-label="Output under review"></textarea>' +
        '<div class="rv-actions">' +
        '<button class="btn btn-primary" data-testid="review-approve">Approve</button>' +
        '<button class="btn" data-testid="review-edit">Submit edit</button>' +
        '<button class="btn btn-danger-outline" data-testid="review-exit">Exit early</button>' +
        '<span class="rv-msg muted small" id="rv-msg"></span>' +
        '</div>';
      panel.querySelector('[data-testid="review-text"]').value = r.taskOutput ?? '';
    }
    setText(panel.querySelector('[data-testid="review-count"]'),
      pending.length > 1 ? '1 of ' + pending.length + ' pending' : '');
    setText(panel.querySelector('[data-testid="review-countdown"]'), countdownText(r));
    const sending = UI.reviewSent === r.reviewId && Date.now() - UI.reviewSentAt < 8000;
    for (const b of panel.querySelectorAll('.rv-actions button')) b.disabled = sending;
    const msg = $('rv-msg');
    if (msg && !sending && msg.dataset.kind === 'sent') { msg.textContent = ''; msg.dataset.kind = ''; }
  }

  // A cancel or a pause is not a failure of the task: say what happened rather than the
  // signal's class name.
  function errorText(errorType, reason) {
    if (errorType === 'CancelledError') return '<b>Cancelled</b>: stopped with its run';
    if (PAUSES.has(errorType)) {
      return '<b>Paused</b>: waits for a review; resuming the run continues it';
    }
    return '<b>' + esc(errorType || 'Error') + '</b>' + (reason ? ': ' + esc(reason) : '');
  }

  function countdownText(r) {
    const action = r.onTimeout || 'CONTINUE';
    if (r.deadlineMs == null) return 'no time limit';
    const left = Math.max(0, Math.ceil((r.deadlineMs - serverNow()) / 1000));
    const h = Math.floor(left / 3600);
    const m = Math.floor((left % 3600) / 60);
    const s = left % 60;
    const clock = h ? h + ':' + pad2(m) + ':' + pad2(s) : m + ':' + pad2(s);
    return clock + ' left, then ' + action;
  }

  function decide(decision) {
    const r = pendingReviews()[0];
    if (!r) return;
    const msg = { type: 'review_decision', reviewId: r.reviewId, decision };
    if (decision === 'edit') {
      msg.revisedOutput = $('review-panel').querySelector('[data-testid="review-text"]').value;
    }
    const ok = sendRaw(msg);
    const el = $('rv-msg');
    if (ok) {
      UI.reviewSent = r.reviewId;
      UI.reviewSentAt = Date.now();
      if (el) { el.textContent = 'Sent — waiting for the run…'; el.dataset.kind = 'sent'; }
    } else if (el) {
      el.textContent = 'Not connected: the decision was not sent. Try again when live.';
      el.dataset.kind = 'error';
    }
    invalidate('review');
  }

  // ---- flow graph

  const G = { W: 172, H: 40, GX: 44, GY: 10, PAD: 14, GRIDGAP: 10, GW: 250 };

  /** Builds the graph's structure: nodes, layers and edges, with big layers grouped. */
  function graphModel(run) {
    const expanded = UI.expandedGroups.get(run.ensembleId) || new Set();
    const planIdx = new Map(run.plan.map((p) => [p.taskIndex, p]));
    const byIndex = new Map();     // taskIndex -> top-level tasks (planned rows included)
    const workers = [];
    for (const t of run.tasks.values()) {
      if (t.parentTaskId && run.tasks.has(t.parentTaskId)) workers.push(t);
      else {
        const arr = byIndex.get(t.taskIndex);
        if (arr) arr.push(t); else byIndex.set(t.taskIndex, [t]);
      }
    }
    for (const i of planIdx.keys()) if (!byIndex.has(i)) byIndex.set(i, []);
    const indices = Array.from(byIndex.keys()).sort((a, b) => a - b);
    const deps = new Map();
    let anyDeps = false;
    for (const i of indices) {
      const p = planIdx.get(i);
      const d = p ? p.dependsOn.filter((x) => x !== i && byIndex.has(x)) : [];
      if (d.length) anyDeps = true;
      deps.set(i, d);
    }
    if (!anyDeps && run.workflow === 'SEQUENTIAL') {
      for (let k = 1; k < indices.length; k++) deps.set(indices[k], [indices[k - 1]]);
    }
    // layer = dependency depth (iterative, cycle-safe)
    const depth = new Map();
    for (const i of indices) {
      if (depth.has(i)) continue;
      const stack = [[i, 0]];
      const onStack = new Set([i]);
      while (stack.length) {
        const top = stack[stack.length - 1];
        const [node, k] = top;
        const ds = deps.get(node) || [];
        if (k < ds.length) {
          top[1]++;
          const dnode = ds[k];
          if (!depth.has(dnode) && !onStack.has(dnode)) { stack.push([dnode, 0]); onStack.add(dnode); }
        } else {
          let dd = 0;
          for (const x of ds) if (depth.has(x)) dd = Math.max(dd, depth.get(x) + 1);
          depth.set(node, dd);
          stack.pop();
          onStack.delete(node);
        }
      }
    }
    const nodes = new Map();
    const layers = [];
    const put = (n) => {
      nodes.set(n.id, n);
      (layers[n.layer] || (layers[n.layer] = [])).push(n);
    };
    for (const i of indices) {
      const p = planIdx.get(i);
      const execs = byIndex.get(i);
      let last = null;
      for (const t of execs) if (!t.planned && (!last || (t.startMs ?? 0) >= (last.startMs ?? 0))) last = t;
      put({ id: 'i' + i, kind: 'index', taskIndex: i, layer: depth.get(i) || 0, execs,
        role: last ? last.agentRole : p ? p.agentRole : (execs[0] ? execs[0].agentRole : ''),
        desc: last ? last.description : p ? p.description : (execs[0] ? execs[0].description : ''),
        parents: (deps.get(i) || []).map((x) => 'i' + x), deleg: null, order: i });
    }
    // delegated workers sit one layer right of their caller
    const nodeOfTask = (t) => (t.parentTaskId && run.tasks.has(t.parentTaskId)) ? 'w' + t.taskId : 'i' + t.taskIndex;
    const layerOf = new Map();
    const workerLayer = (t, guard) => {
      if (layerOf.has(t.taskId)) return layerOf.get(t.taskId);
      const parent = run.tasks.get(t.parentTaskId);
      let l;
      if (!parent || guard > 50) l = 1;
      else if (parent.parentTaskId && run.tasks.has(parent.parentTaskId)) l = workerLayer(parent, guard + 1) + 1;
      else l = (depth.get(parent.taskIndex) || 0) + 1;
      layerOf.set(t.taskId, l);
      return l;
    };
    workers.sort((a, b) => (a.startMs ?? 0) - (b.startMs ?? 0) || (a.taskId < b.taskId ? -1 : 1));
    for (const t of workers) {
      put({ id: 'w' + t.taskId, kind: 'worker', taskIndex: t.taskIndex, layer: workerLayer(t, 0),
        execs: [t], role: t.agentRole, desc: t.description,
        parents: [], deleg: nodeOfTask(run.tasks.get(t.parentTaskId)), order: 1e9 + (t.startMs ?? 0) });
    }
    for (let l = 0; l < layers.length; l++) if (!layers[l]) layers[l] = [];
    // order inside a layer: by the mean position of the parents, then by index
    const pos = new Map();
    for (let l = 0; l < layers.length; l++) {
      const L = layers[l];
      if (l > 0 && L.length <= GROUP_THRESHOLD) {
        for (const n of L) {
          const ps = n.deleg ? [n.deleg] : n.parents;
          let sum = 0; let c = 0;
          for (const p of ps) if (pos.has(p)) { sum += pos.get(p); c++; }
          n.bary = c ? sum / c : Infinity;
        }
        L.sort((a, b) => (a.bary - b.bary) || (a.order - b.order));
      } else {
        L.sort((a, b) => a.order - b.order);
      }
      L.forEach((n, k) => pos.set(n.id, k));
    }
    // geometry
    const cols = [];
    let x = G.PAD;
    let maxH = 0;
    for (let l = 0; l < layers.length; l++) {
      const L = layers[l];
      const grouped = L.length > GROUP_THRESHOLD && !expanded.has(l);
      const big = L.length > GROUP_THRESHOLD && !grouped;
      let w = G.W; let h;
      if (grouped) { h = G.H + 16; w = G.GW; }
      else if (big) {
        const nc = Math.ceil(L.length / GRID_ROWS);
        w = nc * G.W + (nc - 1) * G.GRIDGAP;
        h = Math.min(L.length, GRID_ROWS) * (G.H + G.GY) - G.GY + 18;
      } else h = Math.max(0, L.length * (G.H + G.GY) - G.GY);
      cols.push({ l, x, w, h, grouped, big, nodes: L });
      x += w + G.GX;
      maxH = Math.max(maxH, h);
    }
    const width = Math.max(x - G.GX + G.PAD, 0);
    const height = maxH + 2 * G.PAD;
    const groups = [];
    const vis = new Map();   // node id -> drawn id (its own or its group's)
    const edgeVis = new Map();   // node id -> the expanded block its edges attach to
    for (const c of cols) {
      const y0 = G.PAD + (maxH - c.h) / 2;
      if (c.grouped) {
        const gid = 'g' + c.l;
        groups.push({ id: gid, layer: c.l, x: c.x, y: y0, w: G.GW, h: c.h, members: c.nodes });
        for (const n of c.nodes) vis.set(n.id, gid);
        continue;
      }
      c.nodes.forEach((n, k) => {
        if (c.big) {
          const col = Math.floor(k / GRID_ROWS); const row = k % GRID_ROWS;
          n.x = c.x + col * (G.W + G.GRIDGAP); n.y = y0 + 18 + row * (G.H + G.GY);
        } else { n.x = c.x; n.y = y0 + k * (G.H + G.GY); }
        vis.set(n.id, n.id);
      });
      if (c.big) {
        // edges attach to an expanded big layer as a whole, not to each of its nodes
        const block = { id: 'x' + c.l, layer: c.l, expandedAt: { x: c.x, y: y0 }, members: c.nodes,
          x: c.x, y: y0 + 18, w: c.w, h: c.h - 18 };
        groups.push(block);
        for (const n of c.nodes) edgeVis.set(n.id, block.id);
      }
    }
    const byId = new Map(groups.map((g) => [g.id, g]));
    const geo = (id) => (nodes.has(id) ? nodes.get(id) : byId.get(id));
    const edges = [];
    const seen = new Set();
    const addEdge = (a, b, dashed) => {
      const va = edgeVis.get(a) || vis.get(a); const vb = edgeVis.get(b) || vis.get(b);
      if (va == null || vb == null || va === vb) return;
      const key = va + '>' + vb + (dashed ? 'd' : '');
      if (seen.has(key)) return;
      seen.add(key);
      edges.push({ from: geo(va), to: geo(vb), dashed });
    };
    for (const n of nodes.values()) {
      for (const p of n.parents) addEdge(p, n.id, false);
      if (n.deleg) addEdge(n.deleg, n.id, true);
    }
    return { nodes, layers, groups, edges, width, height };
  }

  function nodeState(run, n) {
    const ex = n.execs;
    if (!ex.length) return 'pending';
    let st = null;
    for (const t of ex) {
      if (t.state === 'running') return 'running';
      st = t.state;
    }
    return st || 'pending';
  }

  function nodeTaskId(n) {
    const ex = n.execs;
    if (!ex.length) return null;
    let best = ex[0];
    for (const t of ex) if ((t.startMs ?? -1) >= (best.startMs ?? -1)) best = t;
    return best.taskId;
  }

  function renderGraph() {
    const svg = $('flow-graph');
    const run = currentRun();
    if (UI.graphCollapsed) return;
    if (!run) {
      if (UI.graphKey !== 'none') { svg.innerHTML = ''; svg.setAttribute('width', 0); svg.setAttribute('height', 0); UI.graphKey = 'none'; }
      return;
    }
    const exp = UI.expandedGroups.get(run.ensembleId);
    const key = run.ensembleId + ':' + run.graphVer + ':' + (exp ? Array.from(exp).join(',') : '');
    if (key !== UI.graphKey) {
      const now = performance.now();
      // a structural change relayouts at most 4 times a second
      const same = UI.graphKey && UI.graphKey.split(':')[0] === run.ensembleId;
      if (same && now - UI.graphBuiltAt < 250) {
        if (!UI.graphTimer) {
          UI.graphTimer = setTimeout(() => { UI.graphTimer = 0; invalidate('graph'); },
            260 - (now - UI.graphBuiltAt));
        }
      } else {
        buildGraphSvg(svg, run);
        UI.graphFollow = undefined;
        UI.graphKey = key;
        UI.graphBuiltAt = now;
      }
    }
    updateGraphStates(run);
  }

  function buildGraphSvg(svg, run) {
    const gm = graphModel(run);
    const parts = [];
    parts.push('<defs><marker id="ae-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0.5 L7.5,4 L0,7.5 z" class="arrow"/></marker></defs>');
    parts.push('<g class="edges">');
    for (const e of gm.edges) {
      const x1 = e.from.x + (e.from.w || G.W); const y1 = e.from.y + (e.from.h || G.H) / 2;
      const x2 = e.to.x - 2; const y2 = e.to.y + (e.to.h || G.H) / 2;
      const mx = (x1 + x2) / 2;
      parts.push('<path class="edge' + (e.dashed ? ' deleg' : '') + '" d="M' + r1(x1) + ' ' + r1(y1) +
        ' C' + r1(mx) + ' ' + r1(y1) + ' ' + r1(mx) + ' ' + r1(y2) + ' ' + r1(x2) + ' ' + r1(y2) + '" marker-end="url(#ae-arrow)"/>');
    }
    parts.push('</g><g class="nodes">');
    const nodeList = [];
    const ended = run.status !== 'running';
    for (const n of gm.nodes.values()) {
      if (n.x == null) continue;
      nodeList.push(n);
      const label = (n.kind === 'worker' ? '↳ ' : '#' + n.taskIndex + ' ') + (n.role || '');
      const tid = nodeTaskId(n);
      parts.push('<g class="gn" data-testid="graph-node" data-node-id="' + esc(n.id) + '"' +
        (tid ? ' data-task-id="' + esc(tid) + '"' : '') + ' transform="translate(' + r1(n.x) + ',' + r1(n.y) + ')">' +
        '<title>' + esc((n.kind === 'worker' ? 'delegated: ' : '#' + n.taskIndex + ' ') + (n.role || '') + '\n' + (n.desc || '')) + '</title>' +
        '<rect class="box" width="' + G.W + '" height="' + G.H + '" rx="6"/>' +
        '<rect class="strip" width="4" height="' + G.H + '" rx="2"/>' +
        '<text class="l1" x="12" y="16">' + esc(truncate(label, 22)) + '</text>' +
        '<text class="l2" x="12" y="31">' + esc(truncate(oneLine(n.desc), 27)) + '</text>' +
        '<circle class="sdot" cx="' + (G.W - 11) + '" cy="12" r="4"/>' +
        '</g>');
    }
    for (const g of gm.groups) {
      if (g.expandedAt) {
        parts.push('<g class="gcollapse" data-collapse="' + g.layer + '" transform="translate(' + r1(g.expandedAt.x) + ',' + r1(g.expandedAt.y) + ')">' +
          '<text x="0" y="11" class="link">▴ collapse ' + g.members.length + ' tasks</text></g>');
        continue;
      }
      parts.push('<g class="gn group" data-testid="graph-group" data-group="' + g.layer + '" transform="translate(' + r1(g.x) + ',' + r1(g.y) + ')">' +
        '<title>Click to expand ' + g.members.length + ' tasks</title>' +
        '<rect class="box stack2" x="6" y="6" width="' + G.GW + '" height="' + g.h + '" rx="6"/>' +
        '<rect class="box stack1" x="3" y="3" width="' + G.GW + '" height="' + g.h + '" rx="6"/>' +
        '<rect class="box" width="' + G.GW + '" height="' + g.h + '" rx="6"/>' +
        '<text class="l1 glabel" x="10" y="18"></text>' +
        '<text class="l2" x="10" y="34">click to expand</text>' +
        '<rect class="gbar-bg" x="10" y="' + (g.h - 12) + '" width="' + (G.GW - 20) + '" height="4" rx="2"/>' +
        '<rect class="gbar-done" x="10" y="' + (g.h - 12) + '" width="0" height="4" rx="2"/>' +
        '<rect class="gbar-fail" x="10" y="' + (g.h - 12) + '" width="0" height="4" rx="2"/>' +
        '</g>');
    }
    parts.push('</g>');
    svg.setAttribute('width', gm.width);
    svg.setAttribute('height', gm.height);
    const box = $('graph-scroll');
    const want = Math.max(76, Math.min(gm.height + 2 + (gm.width > box.clientWidth ? 12 : 0), 236));
    if (box._h !== want) { box._h = want; box.style.height = want + 'px'; UI.axisKey = null; invalidate('timeline'); }
    svg.setAttribute('viewBox', '0 0 ' + gm.width + ' ' + gm.height);
    svg.innerHTML = parts.join('');
    const els = svg.querySelectorAll('g.gn[data-node-id]');
    UI.graphNodes = nodeList.map((n, k) => ({ n, el: els[k], cls: '' }));
    const gels = svg.querySelectorAll('g.gn.group');
    UI.graphGroups = gm.groups.filter((g) => !g.expandedAt).map((g, k) => ({ g, el: gels[k], sig: '' }));
    UI.graphEnded = ended;
  }

  function r1(v) { return Math.round(v * 10) / 10; }

  function updateGraphStates(run) {
    const sel = currentTaskId();
    const ended = run.status !== 'running';
    const followNow = UI.manualTask || performance.now() - (UI.graphFollowAt || 0) > 1500;
    if (sel !== UI.graphFollow && followNow) {
      UI.graphFollow = sel;
      UI.graphFollowAt = performance.now();
      const item = UI.graphNodes.find((x) => nodeTaskId(x.n) === sel);
      if (item) {
        const box = $('graph-scroll');
        const sx = box.clientWidth;
        const n = item.n;
        if (n.x < box.scrollLeft || n.x + G.W > box.scrollLeft + sx) box.scrollLeft = Math.max(0, n.x - 24);
        if (n.y < box.scrollTop || n.y + G.H > box.scrollTop + box.clientHeight) box.scrollTop = Math.max(0, n.y - 24);
      }
    }
    for (const item of UI.graphNodes) {
      const st = nodeState(run, item.n);
      const tid = nodeTaskId(item.n);
      const cls = 'gn ns-' + st + (item.n.kind === 'worker' ? ' worker' : '') +
        (tid && tid === sel ? ' sel' : '') + (ended && st === 'pending' ? ' notrun' : '');
      if (cls !== item.cls) { item.el.setAttribute('class', cls); item.cls = cls; }
      if (tid && item.el.getAttribute('data-task-id') !== tid) item.el.setAttribute('data-task-id', tid);
    }
    for (const item of UI.graphGroups) {
      let done = 0; let failed = 0; let running = 0;
      for (const n of item.g.members) {
        const st = nodeState(run, n);
        if (st === 'completed') done++; else if (st === 'failed') failed++; else if (st === 'running') running++;
      }
      const total = item.g.members.length;
      const sig = done + '/' + failed + '/' + running;
      if (sig === item.sig) continue;
      item.sig = sig;
      item.el.querySelector('.glabel').textContent = total + ' tasks · ' + done + ' done · ' + failed + ' failed';
      item.el.querySelector('.l2').textContent = (running ? running + ' running · ' : '') + 'click to expand';
      const w = G.GW - 20;
      item.el.querySelector('.gbar-done').setAttribute('width', r1(w * done / total));
      const f = item.el.querySelector('.gbar-fail');
      f.setAttribute('x', r1(10 + w * done / total));
      f.setAttribute('width', r1(w * failed / total));
      const gst = running ? 'running' : failed ? (done + failed === total ? 'failed' : 'mixed') : done === total ? 'completed' : 'pending';
      item.el.setAttribute('class', 'gn group ns-' + gst);
    }
  }

  // ---- timeline (virtualized)

  /** Display order: top-level tasks by (index, start, id), each followed by its workers. */
  function displayOrder(run) {
    if (run.orderVer === run.structVer && run.order) return run.order;
    const children = new Map();
    const tops = [];
    for (const t of run.tasks.values()) {
      if (t.parentTaskId && run.tasks.has(t.parentTaskId)) {
        const arr = children.get(t.parentTaskId);
        if (arr) arr.push(t); else children.set(t.parentTaskId, [t]);
      } else tops.push(t);
    }
    tops.sort(cmpTasks);
    const out = [];
    const visit = (t, depth) => {
      out.push({ t, depth });
      const cs = children.get(t.taskId);
      if (!cs || depth > 20) return;
      cs.sort((a, b) => ((a.startMs ?? 0) - (b.startMs ?? 0)) || (a.taskId < b.taskId ? -1 : 1));
      for (const c of cs) visit(c, depth + 1);
    };
    for (const t of tops) visit(t, 0);
    run.order = out;
    run.orderVer = run.structVer;
    return out;
  }

  function filteredRows(run) {
    const base = displayOrder(run);
    const f = UI.filter.trim().toLowerCase();
    const sf = UI.stateFilter;
    const key = run.ensembleId + ':' + run.structVer + ':' + f + ':' + sf + ':' + (sf !== 'all' ? run.dataVer : '');
    if (key === UI.tlOrderKey) return UI.tlRows;
    let rows = base;
    if (f || sf !== 'all') {
      rows = base.filter(({ t }) => {
        if (sf !== 'all' && t.state !== sf) return false;
        if (!f) return true;
        return ('#' + t.taskIndex + ' ' + t.agentRole + ' ' + t.description + ' ' + t.taskId).toLowerCase().includes(f);
      });
    }
    UI.tlOrderKey = key;
    UI.tlRows = rows;
    return rows;
  }

  function renderTimeline() {
    const run = currentRun();
    const vp = $('tl-viewport');
    const sizer = $('tl-sizer');
    const rowsEl = $('tl-rows');
    const empty = $('tl-empty');
    if (!run) {
      sizer.style.height = '0px';
      for (const r of UI.rowPool) r.el.style.display = 'none';
      empty.hidden = false;
      empty.textContent = 'No run selected';
      $('tl-count').textContent = '';
      $('tl-axis').innerHTML = '';
      $('tl-grid').innerHTML = '';
      return;
    }
    const sbw = vp.offsetWidth - vp.clientWidth;
    if (UI.sbw !== sbw) { UI.sbw = sbw; $('tl-head').style.paddingRight = sbw + 'px'; UI.axisKey = null; }
    const rows = filteredRows(run);
    empty.hidden = rows.length > 0;
    if (!rows.length) empty.textContent = run.tasks.size ? 'No task matches the filter' : 'No tasks yet';
    const total = displayOrder(run).length;
    setText('tl-count', rows.length === total ? total + ' rows' : rows.length + ' of ' + total + ' rows');
    const h = rows.length * ROW_H;
    if (sizer._h !== h) { sizer.style.height = h + 'px'; sizer._h = h; }
    const span = runSpan(run);
    renderAxis(span);
    const top = vp.scrollTop;
    const vh = vp.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(rows.length, Math.ceil((top + vh) / ROW_H) + OVERSCAN);
    const need = last - first;
    while (UI.rowPool.length < need) UI.rowPool.push(makeRow(rowsEl));
    rowsEl.style.transform = 'translateY(' + (first * ROW_H) + 'px)';
    const sel = currentTaskId();
    const ended = run.status !== 'running';
    for (let k = 0; k < UI.rowPool.length; k++) {
      const r = UI.rowPool[k];
      if (k >= need) { if (r.el.style.display !== 'none') r.el.style.display = 'none'; r.key = null; continue; }
      if (r.el.style.display === 'none') r.el.style.display = '';
      fillRow(r, rows[first + k], span, sel, ended, run);
    }
  }

  function makeRow(parent) {
    const el = document.createElement('div');
    el.className = 'row';
    el.setAttribute('data-testid', 'task-row');
    el.innerHTML = '<span class="c-idx"></span><span class="c-icon"></span><span class="c-role"></span>' +
      '<span class="c-desc"><span class="d-text"></span></span><span class="c-bar"><span class="bar"></span></span><span class="c-dur"></span>';
    parent.appendChild(el);
    const c = el.children;
    return { el, idx: c[0], icon: c[1], role: c[2], desc: c[3], dtext: c[3].firstChild, bar: c[4].firstChild, dur: c[5], key: null, sig: '' };
  }

  function fillRow(r, item, span, sel, ended, run) {
    const t = item.t;
    if (r.key !== t.taskId) {
      r.key = t.taskId;
      r.el.setAttribute('data-task-id', t.taskId);
      r.sig = '';
    }
    const sig = t.ver + '|' + t.state + '|' + item.depth + '|' + (t.taskId === sel) + '|' + ended;
    if (sig !== r.sig) {
      r.sig = sig;
      r.el.setAttribute('data-state', t.state);
      r.el.className = 'row rs-' + t.state + (t.taskId === sel ? ' sel' : '') +
        (item.depth ? ' child' : '') + (ended && t.state === 'pending' ? ' notrun' : '') +
        (ended && t.state === 'running' ? ' stale' : '');
      r.idx.textContent = item.depth ? '' : String(t.taskIndex);
      r.role.textContent = t.agentRole;
      r.role.title = t.agentRole;
      r.desc.style.paddingLeft = (6 + item.depth * 16) + 'px';
      r.dtext.textContent = (item.depth ? '↳ ' : '') + oneLine(t.description);
      r.el.title = '#' + t.taskIndex + ' ' + t.agentRole + ' — ' + oneLine(t.description).slice(0, 300);
    }
    // bar and duration (running bars grow)
    let left = 0; let width = 0; let show = false;
    if (span && t.startMs != null) {
      const s = t.startMs;
      let e = t.endMs;
      if (e == null) e = t.state === 'running' ? span.e : s;
      const tot = span.e - span.s;
      left = Math.max(0, Math.min(100, 100 * (s - span.s) / tot));
      width = Math.max(0, Math.min(100 - left, 100 * (e - s) / tot));
      show = true;
    }
    const bs = show ? left.toFixed(3) + '|' + width.toFixed(3) : 'none';
    if (r.barSig !== bs) {
      r.barSig = bs;
      r.bar.style.display = show ? '' : 'none';
      if (show) { r.bar.style.left = left.toFixed(3) + '%'; r.bar.style.width = width.toFixed(3) + '%'; }
    }
    let dur;
    if (t.state === 'pending') dur = ended ? 'not run' : 'pending';
    else if (t.durationMs != null) dur = fmtDur(t.durationMs);
    else if (t.state === 'running' && t.startMs != null && span) dur = fmtDur(span.e - t.startMs);
    else dur = '—';
    if (r.dur.textContent !== dur) r.dur.textContent = dur;
  }

  function renderAxis(span) {
    const axis = $('tl-axis');
    const grid = $('tl-grid');
    if (!span) { if (UI.axisKey !== 'none') { axis.innerHTML = ''; grid.innerHTML = ''; UI.axisKey = 'none'; } return; }
    const tot = span.e - span.s;
    const raw = tot / 5;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = p;
    for (const m of [1, 2, 2.5, 5, 10]) { if (m * p >= raw) { step = m * p; break; } }
    if (tot > 60000) {
      for (const s of [1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000]) {
        if (s >= raw) { step = s; break; }
      }
    }
    const head = $('tl-head').querySelector('.c-bar');
    const vpRect = $('tl-viewport').getBoundingClientRect();
    const hr = head.getBoundingClientRect();
    const gl = hr.left - vpRect.left; const gw = hr.width;
    const key = step + ':' + Math.floor(tot / step) + ':' + tot.toFixed(0) + ':' + gl + ':' + gw;
    if (key === UI.axisKey) return;
    UI.axisKey = key;
    const ticks = document.createDocumentFragment();
    const lines = document.createDocumentFragment();
    for (let v = 0; v <= tot + 1e-9; v += step) {
      const pct = 100 * v / tot;
      if (pct > 99.5 && v > 0) break;
      // the last label would run into the duration column: keep its line, drop its text
      const room = gw * (1 - pct / 100);
      const tick = document.createElement('span');
      tick.className = 'tick';
      tick.style.left = pct.toFixed(3) + '%';
      tick.textContent = room < 46 && v > 0 ? '' : fmtAxis(v);
      ticks.appendChild(tick);
      const line = document.createElement('span');
      line.className = 'gline';
      line.style.left = (gl + gw * v / tot).toFixed(1) + 'px';
      lines.appendChild(line);
    }
    axis.replaceChildren(ticks);
    grid.replaceChildren(lines);
  }

  // ---- task detail

  function renderDetail() {
    const pane = $('detail');
    const run = currentRun();
    const id = currentTaskId();
    const t = run && id ? run.tasks.get(id) : null;
    if (!t) {
      const k = 'empty:' + (run ? run.ensembleId + ':' + run.dataVer : '');
      if (UI.detailKey !== k) {
        UI.detailKey = k;
        pane.innerHTML = run ? runSummaryHtml(run) : '<div class="dt-empty"><div class="dt-empty-icon" aria-hidden="true">☰</div>' +
          '<div>Task details appear here.</div></div>';
      }
      return;
    }
    const key = run.ensembleId + ':' + t.taskId + ':' + t.ver + ':' + (UI.manualTask ? 'm' : 'a') + ':' + UI.detailRev + ':' + run.status;
    if (UI.detailKey !== key) {
      UI.detailKey = key;
      const scroll = pane.scrollTop;
      pane.innerHTML = detailHtml(run, t);
      pane.scrollTop = scroll;
      UI.detailStreamKey = null;
    }
    const streamEl = pane.querySelector('[data-testid="token-stream"]');
    if (streamEl) {
      const sk = t.taskId + ':' + t.streamVer;
      if (UI.detailStreamKey !== sk) {
        UI.detailStreamKey = sk;
        const atBottom = streamEl.scrollHeight - streamEl.scrollTop - streamEl.clientHeight < 24;
        streamEl.textContent = t.stream;
        if (atBottom) streamEl.scrollTop = streamEl.scrollHeight;
      }
    }
    const live = pane.querySelector('#dt-live-dur');
    if (live && t.state === 'running') {
      const span = runSpan(run);
      if (span && t.startMs != null) live.textContent = fmtDur(span.e - t.startMs);
    }
  }
  UI.detailRev = 0;

  /** What the detail pane shows when no task is selected: the run at a glance. */
  function runSummaryHtml(run) {
    const h = [];
    h.push('<div class="dt-head"><span class="dt-role">Run summary</span><span class="grow"></span>' +
      '<span class="status ' + statusClass(run.status) + '">' + esc(run.status) + '</span></div>');
    h.push('<div class="dt-hint muted small">Select a task in the timeline or the flow graph to see its prompt, output, tool calls and model calls' +
      (run.status === 'running' ? '; the running task is shown here automatically.' : '.') + '</div>');
    const c = run.counts;
    const cells = [
      ['Workflow', esc(run.workflow ? run.workflow.toLowerCase() : '—')],
      ['Started', esc(fmtClock(run.startMs))],
      ['Ended', esc(run.endMs != null ? fmtClock(run.endMs) : '—')],
      ['Exit', esc(run.status === 'cancelled' ? 'cancelled'
        : run.exitReason ? run.exitReason.toLowerCase().replace(/_/g, ' ') : '—')],
      ['Tasks', esc(String(c.all))],
      ['Running', esc(String(c.running))],
      ['Failed', esc(String(c.failed))],
      ['Delegations', esc(String(run.delegations.size))],
    ];
    h.push('<div class="dt-metrics">' + cells.map(([k, v]) =>
      '<div class="metric"><span class="m-label">' + k + '</span><span class="m-value">' + v + '</span></div>').join('') + '</div>');
    if (run.errorType || run.reason) {
      h.push('<div class="dt-error">' + errorText(run.errorType, run.reason) + '</div>');
    }
    const list = (title, tasks, extra) => {
      if (!tasks.length) return;
      h.push('<div class="dt-block"><div class="dt-label">' + esc(title) + '</div>' + tasks.map((t) =>
        '<button class="sum-row" data-goto="' + esc(t.taskId) + '"><span class="dot ' + statusClass(t.state) + '"></span>' +
        '<span class="sum-idx">#' + esc(t.taskIndex) + '</span><span class="sum-role">' + esc(t.agentRole) + '</span>' +
        '<span class="sum-desc">' + esc(oneLine(t.description)) + '</span><span class="sum-extra">' + esc(extra(t)) + '</span></button>').join('') + '</div>');
    };
    const all = Array.from(run.tasks.values());
    const failed = all.filter((t) => t.state === 'failed').sort(cmpTasks).slice(0, 8);
    list('Failed tasks' + (c.failed > failed.length ? ' (first ' + failed.length + ' of ' + c.failed + ')' : ''), failed,
      (t) => t.error ? (t.error.errorType || 'error') : 'failed');
    const running = all.filter((t) => t.state === 'running').sort((a, b) => (b.startMs ?? 0) - (a.startMs ?? 0)).slice(0, 8);
    const span = runSpan(run);
    list('Running now' + (c.running > running.length ? ' (latest ' + running.length + ' of ' + c.running + ')' : ''), running,
      (t) => span && t.startMs != null ? fmtDur(span.e - t.startMs) : '');
    const slow = all.filter((t) => t.durationMs != null).sort((a, b) => b.durationMs - a.durationMs).slice(0, 5);
    list('Slowest tasks', slow, (t) => fmtDur(t.durationMs));
    if (run.inputs && Object.keys(run.inputs).length) {
      h.push(section('inputs', 'Inputs', '<pre class="prompt">' + esc(JSON.stringify(run.inputs, null, 2)) + '</pre>', { forceOpen: true }));
    }
    h.push('<div class="dt-foot muted small">run id <code>' + esc(run.ensembleId) + '</code></div>');
    return h.join('');
  }

  function section(key, title, body, opts) {
    const open = UI.openDetails.has(key) || (opts && opts.forceOpen);
    return '<details class="dt-sec" data-sec="' + esc(key) + '"' + (open ? ' open' : '') + '>' +
      '<summary>' + title + '</summary><div class="dt-sec-body">' + body + '</div></details>';
  }

  function moreText(key, text, cls) {
    const s = String(text ?? '');
    if (s.length <= TRUNCATE) return '<pre class="' + (cls || 'tc-pre') + '">' + esc(s) + '</pre>';
    const open = UI.expandedText.has(key);
    return '<pre class="' + (cls || 'tc-pre') + '">' + esc(open ? s : s.slice(0, TRUNCATE) + '…') + '</pre>' +
      '<button class="link more" data-more="' + esc(key) + '">' + (open ? 'show less' : 'show more (' + fmtInt(s.length) + ' chars)') + '</button>';
  }

  function detailHtml(run, t) {
    const h = [];
    const parent = t.parentTaskId ? run.tasks.get(t.parentTaskId) : null;
    const rates = costRates(run);
    const cost = taskCost(run, t);
    const span = runSpan(run);
    h.push('<div class="dt-head">' +
      '<span class="status ' + statusClass(t.state) + '" data-testid="task-state">' + esc(t.state) + '</span>' +
      '<span class="dt-idx">#' + esc(t.taskIndex) + '</span>' +
      '<span class="dt-role">' + esc(t.agentRole) + '</span>' +
      (t.name ? '<span class="chip">' + esc(t.name) + '</span>' : '') +
      '<span class="grow"></span>' +
      (UI.manualTask ? '' : '<span class="muted small" title="following the running task">auto</span>') +
      '<button class="icon-btn" data-close="1" title="Close (follow the running task)" aria-label="Close">×</button></div>');
    h.push('<div class="dt-desc" data-testid="task-description">' + esc(t.description) + '</div>');
    if (parent) {
      h.push('<div class="dt-parent">delegated by <button class="link" data-goto="' + esc(parent.taskId) + '">#' +
        esc(parent.taskIndex) + ' ' + esc(parent.agentRole) + '</button></div>');
    }
    if (t.dependsOn && t.dependsOn.length) {
      h.push('<div class="dt-parent">waits for ' + t.dependsOn.map((i) => '#' + esc(i)).join(', ') + '</div>');
    }
    const durText = t.durationMs != null ? fmtDur(t.durationMs)
      : (t.state === 'running' && span && t.startMs != null ? fmtDur(span.e - t.startMs) : '—');
    const cells = [
      ['Duration', '<span id="' + (t.state === 'running' ? 'dt-live-dur' : 'dt-dur') + '">' + esc(durText) + '</span>'],
      ['Started', esc(t.startMs != null ? fmtClock(t.startMs) : '—')],
      ['Iterations', esc(String(uiIterations(t))) + (t.liveIteration != null ? ' <span class="muted small">(+1 running)</span>' : '')],
      ['In tokens', esc(fmtInt(uiIn(t)))],
      ['Out tokens', esc(fmtInt(uiOut(t)))],
      ['Cost', esc(rates ? fmtCost(cost, rates.currency) : '—')],
      ['Tool calls', esc(String(uiToolCallCount(t)))],
      ['Model', esc(t.modelName || '—')],
    ];
    h.push('<div class="dt-metrics">' + cells.map(([k, v]) =>
      '<div class="metric"><span class="m-label">' + k + '</span><span class="m-value">' + v + '</span></div>').join('') + '</div>');

    if (t.error) {
      const note = t.state === 'paused' ? 'dt-error dt-note' : 'dt-error';
      h.push('<div class="' + note + '" data-testid="task-error">' + errorText(t.error.errorType, t.error.reason) + '</div>');
    }
    if (t.state === 'running' && run.status === 'running') {
      h.push('<div class="dt-block"><div class="dt-label">Streaming <span class="pulse" aria-hidden="true"></span></div>' +
        '<pre class="stream" data-testid="token-stream"></pre></div>');
    }
    if (t.output != null) {
      h.push(section('out', 'Output', '<pre class="out" data-testid="task-output">' + esc(t.output) + '</pre>', { forceOpen: !UI.openDetails.has('out:closed') }));
    }
    if (t.expectedOutput) h.push(section('expected', 'Expected output', '<pre class="plain">' + esc(t.expectedOutput) + '</pre>'));
    if (t.assembledContext != null) h.push(section('prompt', 'Prompt', '<pre class="prompt" data-testid="task-prompt">' + esc(t.assembledContext) + '</pre>'));
    if (t.systemPrompt != null) {
      h.push(section('system', 'System prompt', '<pre class="prompt">' + esc(t.systemPrompt) + '</pre>' +
        (t.toolNames && t.toolNames.length ? '<div class="muted small">tools: ' + t.toolNames.map(esc).join(', ') + '</div>' : '')));
    }
    // delegations made by this task
    const dels = [];
    for (const d of run.delegations.values()) if (d.fromTaskId === t.taskId) dels.push(d);
    if (dels.length) {
      h.push(section('deleg', 'Delegations (' + dels.length + ')', dels.map((d) => {
        const ds = delegationState(run, d);
        return '<div class="dl-item"><span class="status ' + statusClass(d.status) + '">' + esc(d.status) + '</span> ' +
          '<button class="link" data-goto="' + esc(d.delegationId) + '">' + esc(d.to || '?') + '</button> ' +
          '<span class="muted">' + esc(truncate(oneLine(ds.taskDescription || d.descSeen || ''), 80)) + '</span>' +
          (d.durationMs != null ? ' <span class="muted small">' + esc(fmtDur(d.durationMs)) + '</span>' : '') +
          (d.reason ? '<div class="dt-error small">' + esc(d.reason) + '</div>' : '') + '</div>';
      }).join(''), { forceOpen: true }));
    }
    // tool calls
    const n = uiToolCallCount(t);
    let tc = '';
    if (t.trimmed) {
      tc = '<div class="muted small">Tool calls and model calls of older finished tasks are not kept here; the run\'s full trace has them.</div>';
    } else if (!t.toolCalls.length) tc = '<div class="muted small">No tool calls' + (n ? ' kept' : '') + '.</div>';
    else {
      if (n > t.toolCalls.length) tc += '<div class="muted small">Showing the last ' + t.toolCalls.length + ' of ' + n + '.</div>';
      t.toolCalls.forEach((c, k) => {
        const idk = t.taskId + ':' + (c.index != null ? c.index : 'p' + k);
        const oc = (c.outcome || '').toLowerCase();
        tc += '<div class="tool-call" data-testid="tool-call">' +
          '<div class="tc-head"><span class="tc-num">' + (c.index != null ? c.index : k + 1) + '</span>' +
          '<span class="tc-name">' + esc(c.toolName) + '</span>' +
          '<span class="outcome oc-' + esc(oc) + '">' + esc(c.outcome || '') + '</span><span class="grow"></span>' +
          '<span class="muted small">' + esc(fmtDur(c.durationMs)) + '</span></div>' +
          '<div class="tc-label">arguments</div>' + moreText(idk + ':a', c.arguments) +
          '<div class="tc-label">result</div>' + moreText(idk + ':r', c.result) + '</div>';
      });
    }
    h.push(section('tools', 'Tool calls (' + n + ')', tc, { forceOpen: !UI.openDetails.has('tools:closed') }));
    // model calls
    let it = '';
    if (!t.recentIterations.length) it = '<div class="muted small">' + (t.trimmed ? 'Not kept for older finished tasks.' : t.state === 'running' ? 'No model calls yet.' : 'No model calls kept.') + '</div>';
    else {
      it = '<table class="iters"><thead><tr><th>#</th><th>response</th><th class="num">in</th><th class="num">out</th><th class="num">latency</th></tr></thead><tbody>' +
        t.recentIterations.map((r) => '<tr><td>' + esc(r.iterationIndex) + '</td><td>' +
          esc((r.responseType || '').replace('_', ' ').toLowerCase()) + '</td><td class="num">' + esc(fmtInt(r.inputTokens)) +
          '</td><td class="num">' + esc(fmtInt(r.outputTokens)) + '</td><td class="num">' + esc(fmtDur(r.latencyMs)) + '</td></tr>').join('') +
        '</tbody></table>';
    }
    h.push(section('iters', 'LLM iterations (last ' + keptIterations() + ')', it, { forceOpen: !UI.openDetails.has('iters:closed') }));
    h.push('<div class="dt-foot muted small">task id <code>' + esc(t.taskId) + '</code></div>');
    return h.join('');
  }

  // ---------------------------------------------------------------- events (DOM)

  function bindDom() {
    $('run-list').addEventListener('click', (e) => {
      const li = e.target.closest('[data-ensemble-id]');
      if (li) selectRun(li.getAttribute('data-ensemble-id'), true);
    });
    $('run-list').addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' && e.key !== ' ') return;
      const li = e.target.closest('[data-ensemble-id]');
      if (li) { e.preventDefault(); selectRun(li.getAttribute('data-ensemble-id'), true); }
    });
    $('run-header').addEventListener('click', (e) => {
      const run = currentRun();
      if (!run) return;
      if (e.target.closest('#rh-cancel')) cancelRun(run);
      else if (e.target.closest('#rh-trace') && TOKEN) { e.preventDefault(); openTrace(run); }
    });
    $('review-panel').addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      const id = b.getAttribute('data-testid');
      if (id === 'review-approve') decide('approve');
      else if (id === 'review-edit') decide('edit');
      else if (id === 'review-exit') decide('exit_early');
      else if (b.dataset.run) selectRun(b.dataset.run, true);
    });
    $('tl-rows').addEventListener('click', (e) => {
      const row = e.target.closest('[data-task-id]');
      if (row) selectTask(row.getAttribute('data-task-id'), true);
    });
    const vp = $('tl-viewport');
    vp.addEventListener('scroll', () => invalidate('timeline'), { passive: true });
    vp.addEventListener('keydown', (e) => {
      if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
      const run = currentRun();
      if (!run) return;
      const rows = filteredRows(run);
      const cur = currentTaskId();
      let k = rows.findIndex((r) => r.t.taskId === cur);
      k = e.key === 'ArrowDown' ? Math.min(rows.length - 1, k + 1) : Math.max(0, k - 1);
      if (rows[k]) { e.preventDefault(); selectTask(rows[k].t.taskId, true); scrollToRow(k); }
    });
    $('tl-filter').addEventListener('input', (e) => { UI.filter = e.target.value; invalidate('timeline'); });
    $('tl-state-filter').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-f]');
      if (!b) return;
      UI.stateFilter = b.dataset.f;
      for (const x of $('tl-state-filter').children) x.classList.toggle('on', x === b);
      $('tl-viewport').scrollTop = 0;
      invalidate('timeline');
    });
    $('flow-graph').addEventListener('click', (e) => {
      const run = currentRun();
      if (!run) return;
      const grp = e.target.closest('[data-group]');
      if (grp) {
        const l = Number(grp.getAttribute('data-group'));
        let s = UI.expandedGroups.get(run.ensembleId);
        if (!s) UI.expandedGroups.set(run.ensembleId, (s = new Set()));
        s.add(l);
        UI.graphBuiltAt = 0;
        invalidate('graph');
        return;
      }
      const col = e.target.closest('[data-collapse]');
      if (col) {
        const s = UI.expandedGroups.get(run.ensembleId);
        if (s) s.delete(Number(col.getAttribute('data-collapse')));
        UI.graphBuiltAt = 0;
        invalidate('graph');
        return;
      }
      const node = e.target.closest('[data-task-id]');
      if (node) {
        const id = node.getAttribute('data-task-id');
        selectTask(id, true);
        revealTask(id);
      }
    });
    $('graph-toggle').addEventListener('click', () => {
      UI.graphCollapsed = !UI.graphCollapsed;
      $('graph-panel').classList.toggle('collapsed', UI.graphCollapsed);
      $('graph-toggle').setAttribute('aria-expanded', String(!UI.graphCollapsed));
      UI.graphKey = null;
      UI.axisKey = null;
      invalidate('graph', 'timeline');
    });
    const pane = $('detail');
    pane.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.dataset.close) { selectTask(null, false); UI.autoTask = null; UI.detailKey = null; invalidate('detail'); return; }
      if (b.dataset.more) {
        const k = b.dataset.more;
        if (UI.expandedText.has(k)) UI.expandedText.delete(k); else UI.expandedText.add(k);
        UI.detailRev++;
        invalidate('detail');
        return;
      }
      if (b.dataset.goto) { selectTask(b.dataset.goto, true); revealTask(b.dataset.goto); }
    });
    pane.addEventListener('toggle', (e) => {
      const d = e.target;
      if (!(d instanceof HTMLDetailsElement) || !d.dataset.sec) return;
      const k = d.dataset.sec;
      if (d.open) { UI.openDetails.add(k); UI.openDetails.delete(k + ':closed'); }
      else { UI.openDetails.delete(k); UI.openDetails.add(k + ':closed'); }
    }, true);
    window.addEventListener('resize', () => { UI.axisKey = null; invalidate('timeline'); });
    // the clock: elapsed times, growing bars and review countdowns
    setInterval(() => {
      const run = currentRun();
      if (run && run.status === 'running') invalidate('header', 'timeline', 'detail', 'list');
      if (M.reviews.size) invalidate('review');
    }, 250);
  }

  function scrollToRow(k) {
    const vp = $('tl-viewport');
    const y = k * ROW_H;
    if (y < vp.scrollTop) vp.scrollTop = y;
    else if (y + ROW_H > vp.scrollTop + vp.clientHeight) vp.scrollTop = y + ROW_H - vp.clientHeight;
  }

  function revealTask(id) {
    const run = currentRun();
    if (!run) return;
    let rows = filteredRows(run);
    let k = rows.findIndex((r) => r.t.taskId === id);
    if (k < 0 && (UI.filter || UI.stateFilter !== 'all')) {
      UI.filter = ''; UI.stateFilter = 'all';
      $('tl-filter').value = '';
      for (const x of $('tl-state-filter').children) x.classList.toggle('on', x.dataset.f === 'all');
      rows = filteredRows(run);
      k = rows.findIndex((r) => r.t.taskId === id);
    }
    if (k >= 0) {
      const vp = $('tl-viewport');
      const y = k * ROW_H;
      if (y < vp.scrollTop || y + ROW_H > vp.scrollTop + vp.clientHeight) {
        vp.scrollTop = Math.max(0, y - vp.clientHeight / 2);
      }
    }
    invalidate('timeline');
  }

  // ---------------------------------------------------------------- 5. the test contract

  const api = {
    ready: false,
    /** The page's state model as plain JSON data (see static/README.md). */
    state() { return JSON.parse(JSON.stringify(snapshot())); },
    /** Folds one message as if it came from the socket. */
    ingest(message) {
      const m = typeof message === 'string' ? JSON.parse(message) : message;
      if (Array.isArray(m)) { let changed = false; for (const x of m) changed = fold(x) || changed; return changed; }
      return fold(m);
    },
    /** Renders now what is pending (tests: no need to wait for an animation frame). */
    flush() { flush(); },
    /** Per-run cursors the page would resume from. */
    cursors() { return cursors(); },
    selectRun(id) { selectRun(id, true); flush(); },
    selectTask(id) { selectTask(id, true); revealTask(id); flush(); },
    /** Client messages the page sent (or tried to send), newest last. */
    sent: [],
    /** Milliseconds the last render took. */
    get lastRenderMs() { return UI.lastRenderMs; },
    get connection() { return connText(); },
  };
  window.__agentensemble = api;

  bindDom();
  invalidate(...ALL);
  connect();
})();
