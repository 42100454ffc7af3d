// The only module that touches @vscode/webview-ui-toolkit: every control the dashboard uses is made
// here, so swapping the toolkit (e.g. for @vscode-elements/elements) changes this file alone.
import {
  provideVSCodeDesignSystem,
  vsCodeButton,
  vsCodeCheckbox,
  vsCodeDropdown,
  vsCodeOption,
  vsCodeTextField,
} from '@vscode/webview-ui-toolkit';

let registered = false;

export function registerToolkit(): void {
  if (registered) return;
  registered = true;
  provideVSCodeDesignSystem().register(vsCodeButton(), vsCodeCheckbox(), vsCodeDropdown(), vsCodeOption(), vsCodeTextField());
}

export function button(label: string, onClick: () => void, options: { primary?: boolean; title?: string } = {}): HTMLElement {
  const element = document.createElement('vscode-button');
  element.textContent = label;
  element.setAttribute('appearance', options.primary ? 'primary' : 'secondary');
  if (options.title) element.title = options.title;
  element.addEventListener('click', onClick);
  return element;
}

export function checkbox(label: string, checked: boolean, onChange: (checked: boolean) => void): HTMLElement {
  const element = document.createElement('vscode-checkbox') as HTMLElement & { checked: boolean };
  element.textContent = label;
  if (checked) element.setAttribute('checked', '');
  element.addEventListener('change', () => onChange(element.checked));
  return element;
}

export interface Choice {
  value: string;
  label: string;
}

export function dropdown(choices: readonly Choice[], selected: string | null, onChange: (value: string) => void, title?: string): HTMLElement {
  const element = document.createElement('vscode-dropdown') as HTMLElement & { value: string };
  if (title) element.title = title;
  for (const choice of choices) {
    const option = document.createElement('vscode-option');
    option.setAttribute('value', choice.value);
    option.textContent = choice.label;
    if (choice.value === selected) option.setAttribute('selected', '');
    element.append(option);
  }
  element.addEventListener('change', () => onChange(element.value));
  return element;
}

export function textField(value: string, placeholder: string, onInput: (value: string) => void): HTMLElement {
  const element = document.createElement('vscode-text-field') as HTMLElement & { value: string };
  element.setAttribute('placeholder', placeholder);
  element.setAttribute('value', value);
  element.addEventListener('input', () => onInput(element.value));
  return element;
}
