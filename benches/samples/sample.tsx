/**
 * Sortable, paginated data table for the admin dashboard.
 */
import React, { useMemo, useState, type ReactNode } from "react";

export interface Column<T> {
  key: keyof T & string;
  header: string;
  width?: number;
  sortable?: boolean;
  render?: (row: T) => ReactNode;
}

type SortDir = "asc" | "desc";

interface DataTableProps<T extends { id: string | number }> {
  rows: readonly T[];
  columns: Column<T>[];
  pageSize?: number;
  emptyMessage?: string;
  onRowClick?: (row: T) => void;
}

function compare(a: unknown, b: unknown): number {
  if (a == null && b == null) return 0;
  if (a == null) return -1;
  if (b == null) return 1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** Renders a header cell with an arrow that reflects the sort direction. */
function HeaderCell<T>({
  column,
  active,
  dir,
  onSort,
}: {
  column: Column<T>;
  active: boolean;
  dir: SortDir;
  onSort: (key: Column<T>["key"]) => void;
}) {
  const arrow = active ? (dir === "asc" ? "\u25B2" : "\u25BC") : "";
  return (
    <th
      style={{ width: column.width ? `${column.width}px` : undefined }}
      aria-sort={active ? (dir === "asc" ? "ascending" : "descending") : "none"}
      onClick={column.sortable ? () => onSort(column.key) : undefined}
    >
      {column.header} {arrow && <span className="arrow">{arrow}</span>}
    </th>
  );
}

export function DataTable<T extends { id: string | number }>({
  rows,
  columns,
  pageSize = 20,
  emptyMessage = "No results",
  onRowClick,
}: DataTableProps<T>) {
  const [sortKey, setSortKey] = useState<Column<T>["key"] | null>(null);
  const [dir, setDir] = useState<SortDir>("asc");
  const [page, setPage] = useState(0);

  const sorted = useMemo(() => {
    if (!sortKey) return rows;
    const copy = [...rows];
    copy.sort((a, b) => compare(a[sortKey], b[sortKey]) * (dir === "asc" ? 1 : -1));
    return copy;
  }, [rows, sortKey, dir]);

  const pageCount = Math.max(1, Math.ceil(sorted.length / pageSize));
  const visible = sorted.slice(page * pageSize, (page + 1) * pageSize);

  const handleSort = (key: Column<T>["key"]) => {
    if (key === sortKey) {
      setDir((d) => (d === "asc" ? "desc" : "asc"));
    } else {
      setSortKey(key);
      setDir("asc");
    }
    setPage(0);
  };

  if (rows.length === 0) {
    return <p className="table-empty">{emptyMessage}</p>;
  }

  return (
    <div className="table-wrapper">
      <table>
        <thead>
          <tr>
            {columns.map((col) => (
              <HeaderCell<T> key={col.key} column={col} active={col.key === sortKey} dir={dir} onSort={handleSort} />
            ))}
          </tr>
        </thead>
        <tbody>
          {visible.map((row) => (
            <tr key={row.id} onClick={() => onRowClick?.(row)} className={onRowClick ? "clickable" : ""}>
              {columns.map((col) => (
                <td key={col.key}>{col.render ? col.render(row) : String(row[col.key] ?? "")}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      <nav className="pager" aria-label='Table pages'>
        <button disabled={page === 0} onClick={() => setPage((p) => p - 1)}>
          Previous
        </button>
        <span>
          Page {page + 1} of {pageCount}
        </span>
        <button disabled={page + 1 >= pageCount} onClick={() => setPage((p) => p + 1)}>
          Next
        </button>
      </nav>
    </div>
  );
}

// Example usage with a concrete row type.
interface Invoice {
  id: number;
  customer: string;
  amount: number;
  status: "paid" | "open" | "overdue";
}

const invoiceColumns: Column<Invoice>[] = [
  { key: "id", header: "#", width: 60, sortable: true },
  { key: "customer", header: "Customer", sortable: true },
  {
    key: "amount",
    header: "Amount",
    sortable: true,
    render: (r) => r.amount.toLocaleString("en-US", { style: "currency", currency: "USD" }),
  },
  {
    key: "status",
    header: "Status",
    render: (r) => <span className={`badge badge-${r.status}`}>{r.status}</span>,
  },
];

export const InvoiceTable = ({ invoices }: { invoices: Invoice[] }) => (
  <DataTable rows={invoices} columns={invoiceColumns} pageSize={25} onRowClick={(inv) => console.log("open", inv.id)} />
);
