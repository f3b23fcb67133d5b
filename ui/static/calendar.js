// Climate's web calendar: hosts as rows, time as the x axis, each allocation a bar.
// It uses the public API only (the same as the CLI), with the token from the login field.
// Everything is drawn on a canvas for the visible rows and time range only; the list
// "Visible bookings" is the accessible alternative to the bars (and what tests read).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const HOUR = 3600e3, DAY = 24 * HOUR;
  const ROW = 22, AXIS = 26, LABEL = 180, MAX_LIST = 300;
  const SPANS = { day: DAY, week: 7 * DAY, month: 30 * DAY };
  const MIN_SPAN = HOUR, MAX_SPAN = 120 * DAY;
  // Dark enough for white text (contrast >= 4.5:1), distinct in hue.
  const PALETTE = ['#1f5fa8', '#a33a00', '#2a7a2a', '#8b2c8b', '#6b5300', '#00707a',
    '#b0004f', '#4b4bb3', '#7a4a1f', '#37474f'];
  const BUSY = '#5b6470';

  const st = {
    token: sessionStorage.getItem('climate.token') || '',
    admin: false,
    hosts: [], // host objects (admins) or {id, hypervisor_hostname} from the allocations
    rows: [], // visible rows: {host} or {group}
    allocs: new Map(), // host id -> [{s, e, lease, res}] sorted by s
    leases: new Map(), // lease id -> lease
    start: 0, span: SPANS.week,
    fetched: null, // {from, to} of the allocations held
    timeline: null,
    filter: null, filterText: '', group: '',
    bars: [], // bars drawn: {x0, x1, y, row, a}
    hover: null, selected: null,
    loads: 0, firstReadyMs: 0,
  };
  window.climateCalendar = st; // for the end-to-end tests and the curious

  // ---- API ----
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (st.token) headers['X-Auth-Token'] = st.token;
    const init = { method, headers, credentials: 'same-origin' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    const text = await r.text();
    let j = null;
    try { j = text ? JSON.parse(text) : null; } catch (e) { j = null; }
    if (!r.ok) {
      const err = new Error((j && j.error_message) || `${r.status} ${r.statusText}`);
      err.status = r.status;
      throw err;
    }
    return j;
  }
  const parseDate = (s) => Date.parse(s.length > 23 ? s.slice(0, 23) + 'Z' : s + 'Z');
  const iso = (ms) => new Date(ms).toISOString();
  const pad = (n) => String(n).padStart(2, '0');
  const DOW = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const MON = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  function fmt(ms) {
    const d = new Date(ms);
    return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
  }

  // ---- property queries: Climate's JSON form, or key=value[,key!=value…] ----
  function parseQuery(text) {
    text = text.trim();
    if (!text) return null;
    if (text.startsWith('[')) return JSON.parse(text);
    const parts = text.split(/\s*(?:,|\band\b)\s*/).filter(Boolean).map((p) => {
      const m = p.match(/^\$?([\w.:-]+)\s*(==|=|!=|<=|>=|<|>)\s*(.*)$/);
      if (!m) throw new Error(`cannot read "${p}": write key=value or a JSON query`);
      return [m[2] === '=' ? '==' : m[2], '$' + m[1], m[3].replace(/^["']|["']$/g, '')];
    });
    return parts.length === 1 ? parts[0] : ['and', ...parts];
  }
  function cmp(a, b) {
    const na = Number(a), nb = Number(b);
    if (a !== '' && b !== '' && !isNaN(na) && !isNaN(nb)) return na - nb;
    return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
  }
  function matches(q, host) {
    if (!q || (Array.isArray(q) && q.length === 0)) return true;
    const [op, ...args] = q;
    const val = (ref) => {
      const v = host[String(ref).replace(/^\$/, '')];
      return v === undefined || v === null ? undefined : String(v);
    };
    switch (op) {
      case 'and': return args.every((a) => matches(a, host));
      case 'or': return args.some((a) => matches(a, host));
      case 'not': return !matches(args[0], host);
      case 'in': { const v = val(args[0]); return v !== undefined && args[1].some((x) => cmp(v, String(x)) === 0); }
      default: {
        const v = val(args[0]);
        if (v === undefined) return false;
        const c = cmp(v, String(args[1]));
        switch (op) {
          case '=': case '==': return c === 0;
          case '!=': return c !== 0;
          case '<': return c < 0;
          case '<=': return c <= 0;
          case '>': return c > 0;
          case '>=': return c >= 0;
        }
        throw new Error(`unknown operator ${op}`);
      }
    }
  }

  // ---- colours ----
  function colourOf(project) {
    let h = 0;
    for (const ch of project || '') h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return PALETTE[h % PALETTE.length];
  }
  function describe(a) {
    const l = a.lease && st.leases.get(a.lease);
    if (!l) {
      return { busy: true, name: 'busy', project: '', colour: BUSY, status: '', text: 'Busy (another project’s booking)' };
    }
    return { busy: false, name: l.name, project: l.project_id, colour: colourOf(l.project_id), status: l.status, lease: l };
  }

  // ---- loading ----
  function setState(s) { document.body.dataset.state = s; }
  function showError(e) { $('error').textContent = e ? String(e.message || e) : ''; }

  async function loadAll() {
    setState('loading');
    showError('');
    st.fetched = null;
    try {
      // All at once: the lease list is the longest, the others come in meanwhile.
      const hostsP = api('GET', '/v1/os-hosts').then((h) => ({ admin: true, hosts: h.hosts }), (e) => {
        if (e.status !== 403) throw e;
        return { admin: false, hosts: [] }; // members: rows come from the allocations (names, no properties)
      });
      const leasesP = api('GET', '/v1/leases');
      const allocsP = requestAllocations();
      const timelineP = fetchTimeline();
      const [h, l, a] = await Promise.all([hostsP, leasesP, allocsP, timelineP]);
      st.admin = h.admin;
      st.hosts = h.hosts;
      st.leases = new Map(l.leases.map((x) => [x.id, x]));
      $('who').textContent = st.admin
        ? 'Admin view: every lease by name.'
        : 'Project view: your leases by name, other projects’ as “busy”.';
      fillGroups();
      applyAllocations(a);
      buildRows();
      draw();
      updateList();
      if (!st.firstReadyMs) st.firstReadyMs = performance.now();
      st.loads++;
      setState('ready');
    } catch (e) {
      showError(e.status === 401 ? 'Not signed in: enter a token above.' : e);
      setState(e.status === 401 ? 'login' : 'error');
    }
  }

  function want() {
    return { from: st.start - st.span, to: st.start + 2 * st.span };
  }
  let allocSeq = 0;
  async function requestAllocations() {
    const w = want();
    const seq = ++allocSeq;
    const j = await api('GET', `/v1/os-hosts/allocations?from=${encodeURIComponent(iso(w.from))}&to=${encodeURIComponent(iso(w.to))}`);
    return { j, w, seq };
  }
  async function fetchAllocations() {
    const v = { from: st.start, to: st.start + st.span };
    if (st.fetched && st.fetched.from <= v.from && st.fetched.to >= v.to) return;
    applyAllocations(await requestAllocations());
  }
  function applyAllocations({ j, w, seq }) {
    if (seq !== allocSeq) return; // a later request is on its way
    const m = new Map();
    for (const h of j.allocations) {
      const list = h.reservations.map((r) => ({ s: parseDate(r.start_date), e: parseDate(r.end_date), lease: r.lease_id, res: r.id, host: h.resource_id }));
      list.sort((a, b) => a.s - b.s);
      m.set(h.resource_id, list);
    }
    st.allocs = m;
    st.fetched = w;
    if (!st.admin && st.hosts.length !== j.allocations.length) {
      st.hosts = j.allocations.map((h) => ({ id: h.resource_id, hypervisor_hostname: h.resource_name || `host ${h.resource_id}` }));
      buildRows();
    }
  }

  function stepFor(span) {
    const width = Math.max(200, $('strip').clientWidth - LABEL);
    let step = Math.ceil(span / Math.min(400, width / 3) / 60e3); // minutes
    for (const s of [5, 10, 15, 30, 60, 120, 180, 360, 720, 1440]) if (step <= s) return s;
    return Math.ceil(step / 1440) * 1440;
  }
  let tlSeq = 0;
  async function fetchTimeline() {
    const step = stepFor(st.span);
    const from = Math.floor(st.start / (step * 60e3)) * step * 60e3;
    const to = from + Math.ceil((st.start + st.span - from) / (step * 60e3)) * step * 60e3;
    let path = `/v1/availability/timeline?from=${encodeURIComponent(iso(from))}&to=${encodeURIComponent(iso(to))}&step=${step}m`;
    if (st.filter) path += `&resource_properties=${encodeURIComponent(JSON.stringify(st.filter))}`;
    const seq = ++tlSeq;
    try {
      const j = await api('GET', path);
      if (seq !== tlSeq) return;
      st.timeline = { matching: j.matching_hosts, buckets: j.timeline.map((b) => ({ s: parseDate(b.start_date), e: parseDate(b.end_date), busy: j.matching_hosts - b.free_hosts })) };
    } catch (e) {
      if (seq !== tlSeq) return;
      st.timeline = null;
      if (e.status !== 403 && e.status !== 404) showError(e);
    }
  }

  function fillGroups() {
    const sel = $('group');
    const keep = sel.value;
    const keys = new Set();
    for (const h of st.hosts.slice(0, 200)) {
      for (const [k, v] of Object.entries(h)) {
        if (typeof v === 'string' && !['id', 'hypervisor_hostname', 'service_name', 'cpu_info', 'created_at', 'updated_at', 'trust_id'].includes(k)) keys.add(k);
      }
    }
    sel.replaceChildren(new Option('(none)', ''), ...[...keys].sort().map((k) => new Option(k, k)));
    sel.value = keys.has(keep) ? keep : '';
  }

  function buildRows() {
    let hosts = st.hosts;
    if (st.filter && st.admin) hosts = hosts.filter((h) => matches(st.filter, h));
    const name = (h) => h.hypervisor_hostname || h.id;
    const rows = [];
    if (st.group && st.admin) {
      const groups = new Map();
      for (const h of hosts) {
        const g = String(h[st.group] ?? '(none)');
        if (!groups.has(g)) groups.set(g, []);
        groups.get(g).push(h);
      }
      for (const g of [...groups.keys()].sort(cmp)) {
        rows.push({ group: `${st.group} = ${g}`, count: groups.get(g).length });
        for (const h of groups.get(g)) rows.push({ host: h, name: name(h) });
      }
    } else {
      for (const h of hosts) rows.push({ host: h, name: name(h) });
    }
    st.rows = rows;
    $('spacer').style.height = '0px';
    sizeSpacer();
  }
  function sizeSpacer() {
    const sc = $('scroller');
    $('spacer').style.height = Math.max(0, AXIS + st.rows.length * ROW - sc.clientHeight) + 'px';
  }

  // ---- drawing ----
  let frame = 0;
  function redraw() {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
  }
  function fitCanvas(c, w, h) {
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }
  function ticks(span, px) {
    const steps = [HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY];
    for (const s of steps) if (s * px >= 80) return s;
    return steps[steps.length - 1];
  }
  function tickLabel(t, step) {
    const d = new Date(t);
    if (step < DAY) {
      return d.getUTCHours() === 0 ? `${DOW[d.getUTCDay()]} ${MON[d.getUTCMonth()]} ${d.getUTCDate()}` : `${pad(d.getUTCHours())}:00`;
    }
    return `${DOW[d.getUTCDay()]} ${MON[d.getUTCMonth()]} ${d.getUTCDate()}`;
  }
  function firstAt(list, t) { // first allocation ending after t
    let lo = 0, hi = list.length;
    // sorted by start; allocations on one host do not overlap (whole hosts), so ends are sorted too
    while (lo < hi) { const mid = (lo + hi) >> 1; if (list[mid].e <= t) lo = mid + 1; else hi = mid; }
    return Math.max(0, lo - 8); // instance slots may overlap: look back a little
  }

  function draw() {
    const sc = $('scroller');
    const W = sc.clientWidth, Hh = sc.clientHeight;
    const c = $('gantt');
    const ctx = fitCanvas(c, W, Hh);
    const px = (W - LABEL) / st.span;
    const t0 = st.start, t1 = st.start + st.span;
    const top = sc.scrollTop;
    ctx.clearRect(0, 0, W, Hh);
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const first = Math.max(0, Math.floor(top / ROW));
    const last = Math.min(st.rows.length, Math.ceil((top + Hh - AXIS) / ROW));
    const bars = [];
    // rows and bars
    for (let i = first; i < last; i++) {
      const row = st.rows[i];
      const y = AXIS + i * ROW - top;
      if (row.group) {
        ctx.fillStyle = '#e2e7ed';
        ctx.fillRect(0, y, W, ROW);
        ctx.fillStyle = '#1b1f24';
        ctx.font = 'bold 12px system-ui, sans-serif';
        ctx.fillText(`${row.group} (${row.count})`, 6, y + ROW / 2);
        ctx.font = '12px system-ui, sans-serif';
        continue;
      }
      ctx.fillStyle = i % 2 ? '#f6f8fa' : '#ffffff';
      ctx.fillRect(0, y, W, ROW);
      const list = st.allocs.get(row.host.id) || [];
      for (let k = firstAt(list, t0); k < list.length && list[k].s < t1; k++) {
        const a = list[k];
        if (a.e <= t0) continue;
        const x0 = LABEL + Math.max(0, (a.s - t0) * px);
        const x1 = LABEL + Math.min(W - LABEL, (a.e - t0) * px);
        const d = describe(a);
        ctx.fillStyle = d.colour;
        ctx.fillRect(x0, y + 3, Math.max(2, x1 - x0 - 1), ROW - 6);
        if (d.busy) { // hatch: busy is not a colour alone
          ctx.save();
          ctx.beginPath();
          ctx.rect(x0, y + 3, Math.max(2, x1 - x0 - 1), ROW - 6);
          ctx.clip();
          ctx.strokeStyle = 'rgba(255,255,255,.35)';
          for (let hx = x0 - ROW; hx < x1; hx += 7) { ctx.moveTo(hx, y + ROW); ctx.lineTo(hx + ROW, y); }
          ctx.stroke();
          ctx.restore();
        }
        if (x1 - x0 > 30) {
          ctx.save();
          ctx.beginPath();
          ctx.rect(x0 + 2, y, x1 - x0 - 5, ROW);
          ctx.clip();
          ctx.fillStyle = '#ffffff';
          ctx.fillText(d.name, x0 + 4, y + ROW / 2);
          ctx.restore();
        }
        if (st.selected && a.res === st.selected.res && a.lease === st.selected.lease && a.s === st.selected.s) {
          ctx.strokeStyle = '#0b57d0';
          ctx.lineWidth = 2;
          ctx.strokeRect(x0 - 1, y + 2, Math.max(2, x1 - x0 + 1), ROW - 4);
          ctx.lineWidth = 1;
        }
        bars.push({ x0, x1, y, row: i, a, d });
      }
      // host label over the label column
      ctx.fillStyle = i % 2 ? '#f6f8fa' : '#ffffff';
      ctx.fillRect(0, y, LABEL, ROW);
      ctx.fillStyle = '#1b1f24';
      ctx.fillText(row.name, 6, y + ROW / 2, LABEL - 10);
    }
    st.bars = bars;
    // axis and grid
    ctx.fillStyle = '#f3f5f7';
    ctx.fillRect(0, 0, W, AXIS);
    ctx.fillStyle = '#4d5560';
    ctx.fillText('Host (UTC)', 6, AXIS / 2);
    const step = ticks(st.span, px);
    ctx.strokeStyle = 'rgba(27,31,36,.12)';
    ctx.beginPath();
    for (let t = Math.ceil(t0 / step) * step; t < t1; t += step) {
      const x = Math.round(LABEL + (t - t0) * px) + 0.5;
      ctx.moveTo(x, AXIS);
      ctx.lineTo(x, Hh);
      ctx.fillStyle = '#1b1f24';
      ctx.fillText(tickLabel(t, step), x + 3, AXIS / 2);
    }
    ctx.stroke();
    ctx.strokeStyle = '#c9d0d8';
    ctx.strokeRect(LABEL + 0.5, 0.5, W - LABEL - 1, Hh - 1);
    // now
    const now = Date.now();
    if (now >= t0 && now <= t1) {
      const x = Math.round(LABEL + (now - t0) * px) + 0.5;
      ctx.strokeStyle = '#d0021b';
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(x, 0);
      ctx.lineTo(x, Hh);
      ctx.stroke();
      ctx.lineWidth = 1;
      ctx.fillStyle = '#d0021b';
      ctx.fillText('now', x + 3, AXIS - 6);
    }
    if (!st.rows.length) {
      ctx.fillStyle = '#4d5560';
      ctx.fillText(st.filter ? 'No host matches the filter.' : 'No hosts.', LABEL + 10, AXIS + ROW);
    }
    drawStrip(W, now);
    $('range').textContent = `${fmt(t0)} – ${fmt(t1)} UTC, ${st.rows.filter((r) => r.host).length} hosts`;
  }

  function drawStrip(W, now) {
    const c = $('strip');
    const Hs = 48;
    const ctx = fitCanvas(c, W, Hs);
    ctx.clearRect(0, 0, W, Hs);
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#1b1f24';
    const tl = st.timeline;
    if (!tl) {
      ctx.fillText('Busy hosts: —', 6, Hs / 2);
      c.setAttribute('aria-label', 'Busy hosts over time: not available');
      return;
    }
    const px = (W - LABEL) / st.span;
    let max = 0;
    for (const b of tl.buckets) max = Math.max(max, b.busy);
    ctx.fillText('Busy hosts', 6, 14);
    ctx.fillStyle = '#4d5560';
    ctx.fillText(`peak ${max} of ${tl.matching}`, 6, 32);
    ctx.fillStyle = '#eef1f4';
    ctx.fillRect(LABEL, 0, W - LABEL, Hs);
    ctx.fillStyle = '#b3541e';
    for (const b of tl.buckets) {
      if (b.e <= st.start || b.s >= st.start + st.span || !tl.matching) continue;
      const x0 = LABEL + Math.max(0, (b.s - st.start) * px);
      const x1 = LABEL + Math.min(W - LABEL, (b.e - st.start) * px);
      const h = (Hs - 4) * b.busy / tl.matching;
      ctx.fillRect(x0, Hs - h, Math.max(1, x1 - x0 - 0.5), h);
    }
    if (now >= st.start && now <= st.start + st.span) {
      ctx.fillStyle = '#d0021b';
      ctx.fillRect(LABEL + (now - st.start) * px - 1, 0, 2, Hs);
    }
    c.setAttribute('aria-label', `Busy hosts over time: peak ${max} of ${tl.matching} matching hosts in the visible range`);
  }

  // ---- list of visible bookings (the accessible alternative) ----
  let listTimer = 0;
  function scheduleList() {
    clearTimeout(listTimer);
    listTimer = setTimeout(updateList, 120);
  }
  function barText(b) {
    const d = b.d, row = st.rows[b.row];
    const who = d.busy ? 'busy' : `${d.name}, project ${d.project}`;
    return `${row.name}: ${who}, ${fmt(b.a.s)} – ${fmt(b.a.e)}${d.status ? ', ' + d.status : ''}`;
  }
  function updateList() {
    const ul = $('bars');
    const items = st.bars.slice(0, MAX_LIST).map((b) => {
      const li = document.createElement('li');
      const btn = document.createElement('button');
      btn.type = 'button';
      btn.textContent = barText(b);
      btn.style.setProperty('--swatch', b.d.colour);
      btn.dataset.host = st.rows[b.row].name;
      btn.dataset.lease = b.d.busy ? '' : b.d.name;
      btn.dataset.project = b.d.project;
      btn.dataset.busy = String(b.d.busy);
      btn.dataset.start = iso(b.a.s);
      btn.dataset.end = iso(b.a.e);
      if (st.selected && st.selected === b.a) btn.setAttribute('aria-current', 'true');
      btn.addEventListener('click', () => select(b.a, b.row));
      btn.addEventListener('keydown', listKeys);
      li.appendChild(btn);
      return li;
    });
    ul.replaceChildren(...items);
    $('bar-count').textContent = st.bars.length > MAX_LIST ? `${MAX_LIST} of ${st.bars.length}` : String(st.bars.length);
  }
  function listKeys(ev) {
    const li = ev.target.parentElement;
    if (ev.key === 'ArrowDown' && li.nextElementSibling) { li.nextElementSibling.firstChild.focus(); ev.preventDefault(); }
    if (ev.key === 'ArrowUp' && li.previousElementSibling) { li.previousElementSibling.firstChild.focus(); ev.preventDefault(); }
    if (ev.key === 'Escape') $('scroller').focus();
  }

  // ---- details ----
  function detailOf(a, rowIdx) {
    const d = describe(a);
    const row = st.rows[rowIdx];
    const dl = document.createElement('dl');
    const add = (k, v) => {
      const dt = document.createElement('dt'); dt.textContent = k;
      const dd = document.createElement('dd'); dd.textContent = v;
      dl.append(dt, dd);
    };
    if (d.busy) {
      add('Booking', 'Busy: another project’s');
    } else {
      add('Lease', d.name);
      add('Project', d.project);
      add('Status', d.status);
      add('Lease dates', `${fmt(parseDate(d.lease.start_date))} – ${fmt(parseDate(d.lease.end_date))} UTC`);
      add('Lease id', d.lease.id);
    }
    add('Host', row ? row.name : a.host);
    add('On this host', `${fmt(a.s)} – ${fmt(a.e)} UTC`);
    return dl;
  }
  function select(a, rowIdx) {
    st.selected = a;
    $('detail').replaceChildren(detailOf(a, rowIdx));
    redraw();
    scheduleList();
  }

  // ---- view changes ----
  let dataTimer = 0;
  function viewChanged() {
    setState('loading'); // until the data for the new view is in (tests wait for "ready")
    redraw();
    scheduleList();
    clearTimeout(dataTimer);
    dataTimer = setTimeout(async () => {
      setState('loading');
      try {
        await fetchAllocations();
        await fetchTimeline();
        showError('');
      } catch (e) { showError(e); }
      draw();
      updateList();
      setState('ready');
    }, 150);
    for (const [k, v] of Object.entries(SPANS)) $('zoom-' + k).setAttribute('aria-pressed', String(st.span === v));
  }
  function pan(ms) { st.start += ms; viewChanged(); }
  function zoom(factor, atX) {
    const W = $('scroller').clientWidth;
    const frac = atX === undefined ? 0.5 : Math.min(1, Math.max(0, (atX - LABEL) / (W - LABEL)));
    const anchor = st.start + frac * st.span;
    st.span = Math.min(MAX_SPAN, Math.max(MIN_SPAN, st.span * factor));
    st.start = anchor - frac * st.span;
    viewChanged();
  }
  function setSpan(name) {
    const center = st.start + st.span / 2;
    st.span = SPANS[name];
    st.start = center - st.span / 2;
    viewChanged();
  }
  function goNow() { st.start = Date.now() - st.span * 0.1; viewChanged(); }

  function hit(ev) {
    const r = $('gantt').getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    for (const b of st.bars) if (x >= b.x0 && x <= b.x1 && y >= b.y + 2 && y <= b.y + ROW - 2) return { b, x, y };
    return null;
  }
  function showTip(h, ev) {
    const tip = $('tooltip');
    if (!h) { tip.hidden = true; return; }
    const d = h.b.d;
    tip.textContent = d.busy
      ? `Busy\n${fmt(h.b.a.s)} – ${fmt(h.b.a.e)} UTC`
      : `${d.name} (${d.project})\n${fmt(h.b.a.s)} – ${fmt(h.b.a.e)} UTC\n${d.status}`;
    const cr = $('calendar').getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - cr.left + 12, cr.width - 260) + 'px';
    tip.style.top = (ev.clientY - cr.top + 14) + 'px';
    tip.hidden = false;
  }

  function wire() {
    const sc = $('scroller');
    sc.addEventListener('scroll', () => { redraw(); scheduleList(); });
    sc.addEventListener('wheel', (ev) => {
      if (ev.ctrlKey) { zoom(ev.deltaY > 0 ? 1.25 : 0.8, ev.clientX - sc.getBoundingClientRect().left); ev.preventDefault(); return; }
      const dx = ev.shiftKey ? ev.deltaY : ev.deltaX;
      if (dx && (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY))) {
        pan(dx / (sc.clientWidth - LABEL) * st.span);
        ev.preventDefault();
      }
    }, { passive: false });
    let drag = null;
    sc.addEventListener('pointerdown', (ev) => { drag = { x: ev.clientX, start: st.start, moved: false }; });
    window.addEventListener('pointerup', () => { setTimeout(() => { drag = null; }, 0); });
    sc.addEventListener('pointermove', (ev) => {
      if (drag && ev.buttons === 1) {
        const dx = ev.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          st.start = drag.start - dx / (sc.clientWidth - LABEL) * st.span;
          showTip(null);
          viewChanged();
          return;
        }
      }
      const h = hit(ev);
      sc.style.cursor = h ? 'pointer' : 'grab';
      showTip(h, ev);
    });
    sc.addEventListener('pointerleave', () => showTip(null));
    sc.addEventListener('click', (ev) => {
      if (drag && drag.moved) return;
      const h = hit(ev);
      if (h) select(h.b.a, h.b.row);
    });
    sc.addEventListener('keydown', (ev) => {
      const page = sc.clientHeight - AXIS - ROW;
      const k = ev.key;
      let done = true;
      if (k === 'ArrowLeft') pan(-st.span / 8);
      else if (k === 'ArrowRight') pan(st.span / 8);
      else if (k === 'ArrowUp') sc.scrollTop -= ROW;
      else if (k === 'ArrowDown') sc.scrollTop += ROW;
      else if (k === 'PageUp') sc.scrollTop -= page;
      else if (k === 'PageDown') sc.scrollTop += page;
      else if (k === '+' || k === '=') zoom(0.5);
      else if (k === '-' || k === '_') zoom(2);
      else if (k === 'd') setSpan('day');
      else if (k === 'w') setSpan('week');
      else if (k === 'm') setSpan('month');
      else if (k === 'Home') goNow();
      else if (k === 'Enter') { updateList(); const b = $('bars').querySelector('button'); if (b) b.focus(); }
      else done = false;
      if (done) ev.preventDefault();
    });
    $('zoom-day').addEventListener('click', () => setSpan('day'));
    $('zoom-week').addEventListener('click', () => setSpan('week'));
    $('zoom-month').addEventListener('click', () => setSpan('month'));
    $('zoom-in').addEventListener('click', () => zoom(0.5));
    $('zoom-out').addEventListener('click', () => zoom(2));
    $('prev').addEventListener('click', () => pan(-st.span / 2));
    $('next').addEventListener('click', () => pan(st.span / 2));
    $('now').addEventListener('click', goNow);
    $('filter-form').addEventListener('submit', (ev) => { ev.preventDefault(); applyFilter(); });
    $('group').addEventListener('change', () => { st.group = $('group').value; buildRows(); redraw(); scheduleList(); });
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      st.token = $('token').value.trim();
      if (st.token) sessionStorage.setItem('climate.token', st.token); else sessionStorage.removeItem('climate.token');
      $('token').value = '';
      loadAll();
    });
    $('logout').addEventListener('click', () => { st.token = ''; sessionStorage.removeItem('climate.token'); loadAll(); });
    $('earliest').addEventListener('submit', (ev) => { ev.preventDefault(); findEarliest(); });
    window.addEventListener('resize', () => { sizeSpacer(); redraw(); scheduleList(); });
    setInterval(redraw, 30e3); // keep "now" moving
  }

  async function applyFilter() {
    try {
      st.filterText = $('filter').value;
      st.filter = parseQuery(st.filterText);
      showError(st.filter && !st.admin ? 'The host filter needs the host list (admins); the busy strip is filtered.' : '');
    } catch (e) { showError(e); return; }
    buildRows();
    $('scroller').scrollTop = 0;
    setState('loading');
    await fetchTimeline();
    draw();
    updateList();
    setState('ready');
  }

  // ---- earliest slot and booking ----
  function reservationFor(count, props) {
    return { resource_type: 'physical:host', min: count, max: count, hypervisor_properties: '', resource_properties: props ? JSON.stringify(props) : '' };
  }
  async function findEarliest() {
    const out = $('slots'), status = $('book-status');
    out.replaceChildren();
    status.textContent = 'Looking…';
    let props;
    try { props = parseQuery($('props').value); } catch (e) { status.textContent = e.message; return; }
    const count = parseInt($('count').value, 10);
    const duration = $('duration').value.trim();
    let path = `/v1/availability/earliest?count=${count}&duration=${encodeURIComponent(duration)}&limit=3`;
    if (props) path += `&resource_properties=${encodeURIComponent(JSON.stringify(props))}`;
    try {
      const j = await api('GET', path);
      if (!j.slots.length) { status.textContent = 'No window found.'; return; }
      status.textContent = `${j.slots.length} window(s) found.`;
      for (const s of j.slots) {
        const li = document.createElement('li');
        const from = parseDate(s.start_date), to = parseDate(s.end_date);
        li.append(`${fmt(from)} – ${fmt(to)} UTC (${s.free_hosts} free) `);
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'book';
        b.textContent = 'Book';
        b.setAttribute('aria-label', `Book ${count} host(s) from ${fmt(from)} to ${fmt(to)} UTC`);
        b.addEventListener('click', () => book(from, to, count, props));
        li.append(b);
        out.append(li);
      }
      out.querySelector('button').focus();
    } catch (e) { status.textContent = e.message; }
  }
  async function book(from, to, count, props) {
    const status = $('book-status');
    const name = $('lease-name').value.trim() || `calendar-${new Date().toISOString().slice(0, 16).replace(/[-:T]/g, '')}`;
    const now = Date.now();
    const start = from <= now + 60e3 ? 'now' : iso(from);
    const end = from <= now + 60e3 ? iso(Math.max(from, now) + (to - from)) : iso(to);
    status.textContent = 'Booking…';
    try {
      const j = await api('POST', '/v1/leases', { name, start_date: start, end_date: end, reservations: [reservationFor(count, props)] });
      const l = j.lease;
      status.textContent = `Booked lease ${l.name} (${l.id}), ${fmt(parseDate(l.start_date))} – ${fmt(parseDate(l.end_date))} UTC, ${l.status}.`;
      status.dataset.leaseId = l.id;
      $('slots').replaceChildren();
      st.start = parseDate(l.start_date) - st.span * 0.1;
      await loadAll();
      viewChanged();
    } catch (e) { status.textContent = `Not booked: ${e.message}`; }
  }

  // ---- start: ?at=ISO&zoom=day|week|month|<hours>h&filter=…&group=… ----
  function init() {
    const p = new URLSearchParams(location.search);
    const z = p.get('zoom') || 'week';
    st.span = SPANS[z] || (/^\d+h$/.test(z) ? parseInt(z, 10) * HOUR : SPANS.week);
    const at = p.get('at');
    st.start = at && !isNaN(Date.parse(at)) ? Date.parse(at) : Date.now() - st.span * 0.1;
    if (p.get('filter')) {
      $('filter').value = p.get('filter');
      try { st.filter = parseQuery(p.get('filter')); } catch (e) { showError(e); }
    }
    st.group = p.get('group') || '';
    wire();
    for (const [k, v] of Object.entries(SPANS)) $('zoom-' + k).setAttribute('aria-pressed', String(st.span === v));
    loadAll().then(() => { if (st.group) { $('group').value = st.group; } });
  }
  init();
})();
