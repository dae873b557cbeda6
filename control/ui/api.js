// What netjam's two dashboards share: the run's (control/ui/app.js, at
// the control endpoint's /) and netjam proxy's (proxy/ui/proxies.js, at
// its API's /ui/). Each page loads this file before its own script, and
// its script calls dashboard() once, for the helpers below and its token
// form. It loads nothing and talks to nothing but the page's own server.
"use strict";

// dashboard sets up the page's token form and returns its helpers:
//   home: the page's path; the token's URL is home?token=TOKEN
//   check: the path the form asks to learn whether a token opens it
//   peer: what the page talks to, as its messages name it
//   emptyToken: the form's message when no token was typed
//   fetchInit: more options for every request's fetch (may be absent)
//   onLogin(r): called once a typed token opened check, with its answer
// It returns $ (an element by id), api(method, path, body), setState,
// num, and urlToken: whether the page's URL carried a token.
function dashboard({ home, check, peer, emptyToken, fetchInit, onLogin }) {
  const $ = (id) => document.getElementById(id);

  // api asks the page's server, with the token's cookie, and resolves to
  // { ok, status, data, text }: data is the answer's JSON, or
  // { error: ... } when there is none; status 0 when the server does not
  // answer. A 401 shows the token form.
  async function api(method, path, body) {
    const init = Object.assign({ method, headers: {} }, fetchInit);
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, data: { error: peer + " does not answer: " + e.message } };
    }
    let text = "", data = null;
    try {
      text = await resp.text();
      data = JSON.parse(text);
    } catch (e) {
      data = { error: resp.statusText };
    }
    if (resp.status === 401) showLogin();
    return { ok: resp.ok, status: resp.status, data, text };
  }

  // The token, when the server has one. The URL netjam prints carries it
  // (home?token=...), and the server answers that URL with a session
  // cookie for its port (HttpOnly: no script sees it) that every later
  // request of the page carries. The address bar drops the token at once.
  // Without it, the page asks for it, and asks the server the same way.
  const urlToken = new URLSearchParams(location.search).has("token");
  if (location.search) history.replaceState(null, "", home);

  function showLogin() {
    $("login").hidden = false;
    $("token").focus();
  }

  $("login").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const tok = $("token").value.trim();
    if (tok === "") {
      $("login-err").textContent = emptyToken;
      return;
    }
    try {
      await fetch(home + "?token=" + encodeURIComponent(tok), { cache: "no-store" });
    } catch (e) {
      // api() below says that the server does not answer.
    }
    const r = await api("GET", check);
    if (r.status === 401 || r.status === 0) {
      $("login-err").textContent = r.data.error;
      return;
    }
    $("token").value = "";
    $("login").hidden = true;
    $("login-err").textContent = "";
    onLogin(r);
  });

  function setState(s, text) {
    $("state").dataset.state = s;
    $("state").textContent = text;
  }

  // Numbers as a person reads them.
  function num(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1).replace(/\.0$/, "") : parseFloat(v.toPrecision(3)).toString();
  }

  return { $, api, setState, num, urlToken };
}
