// Checkpoints as .safetensors: every parameter under its own name plus AdamW's moments under
// `optimizer.m.<name>` / `optimizer.v.<name>`; metadata records the run, step and config.
import { openCheckpoint } from '../checkpoint/checkpoint.js';
import { CheckpointFormatError } from '../checkpoint/header.js';
import { readSafetensors, writeSafetensors, type Float32Tensor } from '../checkpoint/safetensors.js';
import { checkpointPath } from '../runlog/format.js';
import type { Trainer } from './trainer.js';

/** Snapshots the weights synchronously (training may go on while the file is written). */
/** `stepsDone`: the steps the weights reflect (default: every step run; less inside a step, before its update). */
export async function saveCheckpoint(trainer: Trainer, runDir: string, runId: string, stepsDone = trainer.nextStep): Promise<string> {
  const steps = stepsDone;
  const tensors: Float32Tensor[] = [];
  trainer.model.params.forEach((param, i) => {
    tensors.push({ name: param.name, dtype: 'F32', shape: param.shape, data: param.data.slice() });
    tensors.push({ name: `optimizer.m.${param.name}`, dtype: 'F32', shape: param.shape, data: trainer.optimizer.m[i]!.slice() });
    tensors.push({ name: `optimizer.v.${param.name}`, dtype: 'F32', shape: param.shape, data: trainer.optimizer.v[i]!.slice() });
  });
  const path = checkpointPath(runDir, Math.max(0, steps - 1));
  await writeSafetensors(path, tensors, { format: 'mxscope-train', runId, stepsDone: String(steps), config: JSON.stringify(trainer.config) });
  return path;
}

/**
 * Loads weights and optimizer state into `trainer`; returns the number of steps already done.
 * Failures become the run's `runEnded.reason`, which every client sees: they say which rule the
 * file broke, never what it holds (no bytes, sizes or header lengths).
 */
export async function loadCheckpoint(trainer: Trainer, path: string): Promise<number> {
  const tensors = await readSafetensors(path).catch((error: unknown) => {
    const what = error instanceof CheckpointFormatError ? 'is not a valid safetensors file' : 'cannot be read';
    throw new Error(`checkpoint ${path} ${what}; resume from a checkpoint mxscope-train wrote`);
  });
  const take = (name: string, into: Float32Array): void => {
    const tensor = tensors.get(name);
    if (tensor === undefined) throw new Error(`checkpoint ${path} has no tensor "${name}"; it was not written by mxscope-train for this model shape`);
    if (tensor.data.length !== into.length) throw new Error(`checkpoint ${path}: tensor "${name}" does not match the model's shape; use the preset the checkpoint was trained with`);
    into.set(tensor.data);
  };
  trainer.model.params.forEach((param, i) => {
    take(param.name, param.data);
    take(`optimizer.m.${param.name}`, trainer.optimizer.m[i]!);
    take(`optimizer.v.${param.name}`, trainer.optimizer.v[i]!);
  });
  const opened = await openCheckpoint(path);
  const stepsDone = Number(opened.metadata.stepsDone);
  await opened.close();
  if (!Number.isInteger(stepsDone) || stepsDone < 0) throw new Error(`checkpoint ${path} has no valid "stepsDone" metadata; it was not written by mxscope-train`);
  trainer.resumeAt(stepsDone);
  return stepsDone;
}
