// Colours come only from VS Code's --vscode-* variables, read again whenever the theme changes
// (VS Code swaps the body class and the variables on the html element).

export interface Theme {
  foreground: string;
  muted: string;
  background: string;
  grid: string;
  /** One colour per run slot. */
  palette: string[];
  error: string;
  warning: string;
  /** Heatmap ramp ends. */
  heatLow: string;
  heatHigh: string;
}

function variable(style: CSSStyleDeclaration, name: string, fallback: string): string {
  return style.getPropertyValue(name).trim() || fallback;
}

export function readTheme(): Theme {
  const style = getComputedStyle(document.documentElement);
  const foreground = variable(style, '--vscode-editor-foreground', variable(style, '--vscode-foreground', '#cccccc'));
  return {
    foreground,
    muted: variable(style, '--vscode-descriptionForeground', foreground),
    background: variable(style, '--vscode-editor-background', '#1f1f1f'),
    grid: variable(style, '--vscode-editorWidget-border', variable(style, '--vscode-panel-border', '#454545')),
    // Opaque: a theme may give a chart colour with alpha (Light Modern's charts.orange is 33 %), and a
    // run drawn in it looks hidden.
    palette: ['blue', 'orange', 'green', 'purple', 'red', 'yellow'].map((name) => opaque(variable(style, `--vscode-charts-${name}`, foreground))),
    error: variable(style, '--vscode-errorForeground', '#f14c4c'),
    warning: variable(style, '--vscode-editorWarning-foreground', '#cca700'),
    heatLow: variable(style, '--vscode-editor-background', '#1f1f1f'),
    heatHigh: variable(style, '--vscode-charts-blue', '#3794ff'),
  };
}

export function onThemeChange(callback: () => void): void {
  const observer = new MutationObserver(callback);
  observer.observe(document.body, { attributes: true, attributeFilter: ['class'] });
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ['style', 'class'] });
}

/** Parse a CSS colour (#rgb, #rrggbb, #rrggbbaa, rgb()/rgba()) into [r, g, b]. */
export function rgb(color: string): [number, number, number] {
  const hex = color.trim().match(/^#([0-9a-f]{3,8})$/i)?.[1];
  if (hex) {
    const full = hex.length <= 4 ? [...hex.slice(0, 3)].map((c) => c + c).join('') : hex.slice(0, 6);
    return [0, 2, 4].map((i) => parseInt(full.slice(i, i + 2), 16)) as [number, number, number];
  }
  const parts = color.match(/rgba?\(([^)]+)\)/)?.[1]?.split(/[ ,/]+/).map(Number);
  return parts && parts.length >= 3 ? [parts[0]!, parts[1]!, parts[2]!] : [128, 128, 128];
}

/** The colour without its alpha channel. */
export function opaque(color: string): string {
  const [r, g, b] = rgb(color);
  return `rgb(${r}, ${g}, ${b})`;
}

export function withAlpha(color: string, alpha: number): string {
  const [r, g, b] = rgb(color);
  return `rgba(${r}, ${g}, ${b}, ${alpha})`;
}
