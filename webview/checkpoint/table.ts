// A sortable table with one selectable row, shared by the tensor list and the comparison.
import { element } from '../dashboard/context.js';

export interface Column<T> {
  title: string;
  /** Cell text; `cell` may decorate the cell further (a sparkline, a bar). */
  text: (row: T) => string;
  sortKey: (row: T) => number | string | null;
  numeric?: boolean;
  cell?: (row: T, td: HTMLTableCellElement) => void;
  tooltip?: string;
}

export interface TableState {
  sortColumn: number;
  descending: boolean;
  selected: string | null;
}

/**
 * A tensor's name as the cell's text, free to wrap after each dot or underscore
 * (`model.layers.0.mlp.<wbr>down_<wbr>proj.<wbr>weight`) rather than anywhere in a word; copied, it
 * is the name.
 */
export function breakableName(td: HTMLTableCellElement, name: string): void {
  td.replaceChildren(...name.split(/(?<=[._])/).flatMap((part, i) => (i === 0 ? [part] : [document.createElement('wbr'), part])));
}

/** Nulls sort last whatever the direction. */
function compare(a: number | string | null, b: number | string | null, descending: boolean): number {
  if (a === null || b === null) return a === b ? 0 : a === null ? 1 : -1;
  const order = a < b ? -1 : a > b ? 1 : 0;
  return descending ? -order : order;
}

/**
 * The table in a horizontally scrolling box (it never widens its pane). `detail` renders the
 * selected row's detail, shown in a full-width row right under it and scrolled into view.
 */
export function renderTable<T>(columns: Column<T>[], rows: T[], key: (row: T) => string, state: TableState, onChange: (state: TableState) => void, detail?: (row: T) => HTMLElement): HTMLElement {
  const box = element('div', 'table-box');
  const table = element('table', 'grid tensors');
  box.append(table);
  const head = table.createTHead().insertRow();
  columns.forEach((column, index) => {
    const th = element('th', column.numeric ? 'num sortable' : 'sortable', column.title);
    if (column.tooltip) th.title = column.tooltip;
    if (index === state.sortColumn) th.append(element('span', 'sort-mark', state.descending ? ' ▾' : ' ▴'));
    th.addEventListener('click', () => onChange({ ...state, sortColumn: index, descending: index === state.sortColumn ? !state.descending : column.numeric === true }));
    head.append(th);
  });
  const sortColumn = columns[state.sortColumn] ?? columns[0];
  const sorted = [...rows].sort((a, b) => compare(sortColumn.sortKey(a), sortColumn.sortKey(b), state.descending));
  const body = table.createTBody();
  for (const row of sorted) {
    const tr = body.insertRow();
    const rowKey = key(row);
    if (rowKey === state.selected) tr.classList.add('selected');
    tr.addEventListener('click', () => onChange({ ...state, selected: rowKey === state.selected ? null : rowKey }));
    for (const column of columns) {
      const td = tr.insertCell();
      if (column.numeric) td.className = 'num';
      td.textContent = column.text(row);
      column.cell?.(row, td);
    }
    if (rowKey === state.selected && detail) {
      const cell = body.insertRow().insertCell();
      cell.colSpan = columns.length;
      cell.className = 'detail-cell';
      const content = detail(row);
      cell.append(content);
      requestAnimationFrame(() => content.scrollIntoView({ block: 'nearest' }));
    }
  }
  return box;
}
