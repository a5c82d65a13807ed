/**
 * Todo list components and a tiny store, written in plain JavaScript + JSX.
 * @module todos
 */
import React, { useCallback, useEffect, useMemo, useState } from "react";
import PropTypes from "prop-types";

const STORAGE_KEY = "todos:v2";
const FILTERS = Object.freeze({ all: () => true, open: (t) => !t.done, done: (t) => t.done });

/**
 * Load todos from localStorage, falling back to an empty list.
 * @returns {Array<{id: string, title: string, done: boolean}>}
 */
export function loadTodos() {
  try {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    return raw ? JSON.parse(raw) : [];
  } catch (err) {
    console.warn(`could not read ${STORAGE_KEY}:`, err);
    return [];
  }
}

export function saveTodos(todos) {
  window.localStorage.setItem(STORAGE_KEY, JSON.stringify(todos));
}

let nextId = Date.now();
const makeId = () => (nextId++).toString(36);

// Reducer-style helpers keep the component logic readable.
export const actions = {
  add(todos, title) {
    const trimmed = title.trim();
    if (!trimmed) return todos;
    return [...todos, { id: makeId(), title: trimmed, done: false, createdAt: new Date().toISOString() }];
  },
  toggle(todos, id) {
    return todos.map((t) => (t.id === id ? { ...t, done: !t.done } : t));
  },
  remove(todos, id) {
    return todos.filter((t) => t.id !== id);
  },
  clearDone(todos) {
    return todos.filter(FILTERS.open);
  },
};

function TodoItem({ todo, onToggle, onRemove }) {
  const className = todo.done ? "todo todo--done" : "todo";
  return (
    <li className={className} data-id={todo.id}>
      <label>
        <input type="checkbox" checked={todo.done} onChange={() => onToggle(todo.id)} />
        <span title={`created ${todo.createdAt ?? "earlier"}`}>{todo.title}</span>
      </label>
      <button type="button" aria-label="Remove" onClick={() => onRemove(todo.id)}>
        &times;
      </button>
    </li>
  );
}

TodoItem.propTypes = {
  todo: PropTypes.shape({ id: PropTypes.string, title: PropTypes.string, done: PropTypes.bool }).isRequired,
  onToggle: PropTypes.func.isRequired,
  onRemove: PropTypes.func.isRequired,
};

export default function TodoApp({ initialFilter = "all" }) {
  const [todos, setTodos] = useState(loadTodos);
  const [draft, setDraft] = useState("");
  const [filter, setFilter] = useState(initialFilter);

  useEffect(() => {
    saveTodos(todos);
    document.title = `Todos (${todos.filter(FILTERS.open).length})`;
  }, [todos]);

  const visible = useMemo(() => todos.filter(FILTERS[filter] || FILTERS.all), [todos, filter]);

  const handleSubmit = useCallback(
    (event) => {
      event.preventDefault();
      setTodos((current) => actions.add(current, draft));
      setDraft("");
    },
    [draft]
  );

  const toggle = (id) => setTodos((current) => actions.toggle(current, id));
  const remove = (id) => setTodos((current) => actions.remove(current, id));

  return (
    <section className="todo-app">
      <form onSubmit={handleSubmit}>
        <input
          value={draft}
          placeholder='What needs doing?'
          onChange={(e) => setDraft(e.target.value)}
          autoFocus
        />
        <button disabled={!draft.trim()}>Add</button>
      </form>
      {visible.length === 0 ? (
        <p className="empty">Nothing here yet.</p>
      ) : (
        <ul>
          {visible.map((todo) => (
            <TodoItem key={todo.id} todo={todo} onToggle={toggle} onRemove={remove} />
          ))}
        </ul>
      )}
      <footer>
        {Object.keys(FILTERS).map((name) => (
          <button key={name} className={name === filter ? "active" : undefined} onClick={() => setFilter(name)}>
            {name}
          </button>
        ))}
        <button onClick={() => setTodos(actions.clearDone)}>Clear completed</button>
      </footer>
    </section>
  );
}

/* Debounce helper used by the search box elsewhere in the app. */
export function debounce(fn, wait = 200) {
  let timer = null;
  return function debounced(...args) {
    clearTimeout(timer);
    timer = setTimeout(() => fn.apply(this, args), wait);
  };
}

export async function syncWithServer(todos, { endpoint = "/api/todos", signal } = {}) {
  const response = await fetch(endpoint, {
    method: "PUT",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ todos }),
    signal,
  });
  if (!response.ok) {
    throw new Error(`sync failed: ${response.status} ${response.statusText}`);
  }
  const { updated = [] } = await response.json();
  return updated.length ? updated : todos;
}
