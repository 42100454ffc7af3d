// Short labels for two files that tell them apart: their base names, or with as many parent folders
// as it takes when the base names are equal ("run-a/model.safetensors", "run-b/model.safetensors").

export function distinctNames(pathA: string, pathB: string): [string, string] {
  const a = pathA.split(/[\\/]+/).filter(Boolean);
  const b = pathB.split(/[\\/]+/).filter(Boolean);
  for (let parts = 1; parts <= Math.max(a.length, b.length); parts++) {
    const left = a.slice(-parts).join('/');
    const right = b.slice(-parts).join('/');
    if (left !== right) return [left, right];
  }
  return [a.join('/'), `${b.join('/')} (same file)`];
}
