;; The emulation trainer's element-wise and row-wise kernels, in float32 SIMD: SwiGLU and the causal
;; softmax of attention (both dominated by exp in plain JavaScript) and RMSNorm, forward and backward.
;; exp is Cephes' expf (range reduction by ln 2 in two parts, degree-6 polynomial; within 2 ulp of
;; the exact value over its range) written with mul then add (no FMA), so results do not depend on
;; the host CPU. Arguments are clamped to [−87, 88] so 2^n stays a normal float; NaN propagates.
;; Also AdamW, transposes, and two kernels that reproduce JavaScript float64 loops bit for bit: the
;; cross-entropy's exponentials (with V8's own exp algorithm) and attention's RoPE head permutes.
(module
  (import "env" "memory" (memory 1))

  (func $exp (param $x v128) (result v128)
    (local $n v128) (local $r v128) (local $p v128)
    (local.set $x (f32x4.max (f32x4.min (local.get $x) (v128.const f32x4 88 88 88 88)) (v128.const f32x4 -87 -87 -87 -87)))
    (local.set $n (f32x4.nearest (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504088896341 1.44269504088896341 1.44269504088896341 1.44269504088896341))))
    (local.set $r (f32x4.sub
      (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375)))
      (f32x4.mul (local.get $n) (v128.const f32x4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4))))
    (local.set $p (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (local.set $p (f32x4.add
      (f32x4.add (f32x4.mul (f32x4.mul (local.get $p) (local.get $r)) (local.get $r)) (local.get $r))
      (v128.const f32x4 1 1 1 1)))
    ;; × 2^n, built from n's bits (n ∈ [−126, 127]).
    (f32x4.mul (local.get $p)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $n)) (v128.const i32x4 127 127 127 127)) (i32.const 23))))

  (func $sigmoid (param $a v128) (result v128)
    (f32x4.div (v128.const f32x4 1 1 1 1)
      (f32x4.add (v128.const f32x4 1 1 1 1) (call $exp (f32x4.neg (local.get $a))))))

  ;; out = silu(gate)·up for `count` floats (a multiple of 4); sig = sigmoid(gate), kept for the backward pass.
  (func (export "swiglu_forward") (param $gate i32) (param $up i32) (param $out i32) (param $sig i32) (param $count i32)
    (local $end i32) (local $a v128) (local $s v128)
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $a (v128.load (local.get $gate)))
        (local.set $s (call $sigmoid (local.get $a)))
        (v128.store (local.get $sig) (local.get $s))
        (v128.store (local.get $out) (f32x4.mul (f32x4.mul (local.get $a) (local.get $s)) (v128.load (local.get $up))))
        (local.set $gate (i32.add (local.get $gate) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
        (local.set $sig (i32.add (local.get $sig) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vectors))))

  ;; dUp = dOut·silu(gate); dGate = dOut·up·s·(1 + gate·(1 − s)) with s = sigmoid(gate) as the forward
  ;; pass kept it in sig (the same bits as computing it again, without a second exp). dUp and dGate
  ;; overwrite up and gate in place.
  (func (export "swiglu_backward") (param $gate i32) (param $up i32) (param $sig i32) (param $dOut i32) (param $count i32)
    (local $end i32) (local $a v128) (local $s v128) (local $d v128)
    (local.set $end (i32.add (local.get $dOut) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $dOut) (local.get $end)))
        (local.set $a (v128.load (local.get $gate)))
        (local.set $s (v128.load (local.get $sig)))
        (local.set $d (v128.load (local.get $dOut)))
        (v128.store (local.get $gate)
          (f32x4.mul (f32x4.mul (f32x4.mul (local.get $d) (v128.load (local.get $up))) (local.get $s))
            (f32x4.add (v128.const f32x4 1 1 1 1)
              (f32x4.mul (local.get $a) (f32x4.sub (v128.const f32x4 1 1 1 1) (local.get $s))))))
        (v128.store (local.get $up) (f32x4.mul (local.get $d) (f32x4.mul (local.get $a) (local.get $s))))
        (local.set $gate (i32.add (local.get $gate) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
        (local.set $sig (i32.add (local.get $sig) (i32.const 16)))
        (local.set $dOut (i32.add (local.get $dOut) (i32.const 16)))
        (br $vectors))))

  ;; Lanes j of the vector starting at column `col` with j ≤ i (the causal mask) as all-ones lanes.
  (func $causal (param $col i32) (param $i i32) (result v128)
    (i32x4.le_s
      (i32x4.add (i32x4.splat (local.get $col)) (v128.const i32x4 0 1 2 3))
      (i32x4.splat (local.get $i))))

  ;; In place on one [seq × seq] score matrix (seq a multiple of 4): row i becomes
  ;; softmax(scale · row[0..i]) followed by zeros.
  (func (export "softmax_causal") (param $p i32) (param $seq i32) (param $scale f32)
    (local $i i32) (local $row i32) (local $col i32) (local $end i32) (local $at i32) (local $mask v128)
    (local $x v128) (local $max v128) (local $sum v128) (local $e v128) (local $inv v128) (local $s v128)
    (local.set $s (f32x4.splat (local.get $scale)))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $i) (local.get $seq)))
        (local.set $row (i32.add (local.get $p) (i32.shl (i32.mul (local.get $i) (local.get $seq)) (i32.const 2))))
        ;; Columns [0, end) cover 0..i in whole vectors.
        (local.set $end (i32.and (i32.add (local.get $i) (i32.const 4)) (i32.const -4)))
        (local.set $max (v128.const f32x4 -inf -inf -inf -inf))
        (local.set $col (i32.const 0))
        (loop $maxes
          (local.set $x (f32x4.mul (v128.load (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2)))) (local.get $s)))
          (local.set $max (f32x4.max (local.get $max)
            (v128.bitselect (local.get $x) (v128.const f32x4 -inf -inf -inf -inf) (call $causal (local.get $col) (local.get $i)))))
          (local.set $col (i32.add (local.get $col) (i32.const 4)))
          (br_if $maxes (i32.lt_u (local.get $col) (local.get $end))))
        (local.set $max (f32x4.max (local.get $max) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $max) (local.get $max))))
        (local.set $max (f32x4.max (local.get $max) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $max) (local.get $max))))
        (local.set $sum (v128.const f32x4 0 0 0 0))
        (local.set $col (i32.const 0))
        (loop $exps
          (local.set $mask (call $causal (local.get $col) (local.get $i)))
          (local.set $e (v128.and (local.get $mask)
            (call $exp (f32x4.sub (f32x4.mul (v128.load (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2)))) (local.get $s)) (local.get $max)))))
          (v128.store (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2))) (local.get $e))
          (local.set $sum (f32x4.add (local.get $sum) (local.get $e)))
          (local.set $col (i32.add (local.get $col) (i32.const 4)))
          (br_if $exps (i32.lt_u (local.get $col) (local.get $end))))
        (local.set $sum (f32x4.add (local.get $sum) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $sum) (local.get $sum))))
        (local.set $sum (f32x4.add (local.get $sum) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $sum) (local.get $sum))))
        (local.set $inv (f32x4.div (v128.const f32x4 1 1 1 1) (local.get $sum)))
        (local.set $col (i32.const 0))
        (loop $scales
          (local.set $at (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2))))
          (v128.store (local.get $at) (f32x4.mul (v128.load (local.get $at)) (local.get $inv)))
          (local.set $col (i32.add (local.get $col) (i32.const 4)))
          (br_if $scales (i32.lt_u (local.get $col) (local.get $end))))
        (block $zeros_done
          (loop $zeros
            (br_if $zeros_done (i32.ge_u (local.get $col) (local.get $seq)))
            (v128.store (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2))) (v128.const i32x4 0 0 0 0))
            (local.set $col (i32.add (local.get $col) (i32.const 4)))
            (br $zeros)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows))))

  ;; In place on one [seq × seq] matrix dS given the probabilities P of softmax_causal (zero above the
  ;; diagonal): dS := P·(dS − rowsum(dS·P))·scale, which is zero wherever P is.
  (func (export "softmax_causal_backward") (param $dS i32) (param $p i32) (param $seq i32) (param $scale f32)
    (local $i i32) (local $row i32) (local $prow i32) (local $col i32) (local $end i32) (local $at i32)
    (local $dot v128) (local $s v128)
    (local.set $s (f32x4.splat (local.get $scale)))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $i) (local.get $seq)))
        (local.set $row (i32.add (local.get $dS) (i32.shl (i32.mul (local.get $i) (local.get $seq)) (i32.const 2))))
        (local.set $prow (i32.add (local.get $p) (i32.shl (i32.mul (local.get $i) (local.get $seq)) (i32.const 2))))
        (local.set $end (i32.and (i32.add (local.get $i) (i32.const 4)) (i32.const -4)))
        (local.set $dot (v128.const f32x4 0 0 0 0))
        (local.set $col (i32.const 0))
        (loop $dots
          (local.set $at (i32.shl (local.get $col) (i32.const 2)))
          (local.set $dot (f32x4.add (local.get $dot)
            (f32x4.mul (v128.load (i32.add (local.get $row) (local.get $at))) (v128.load (i32.add (local.get $prow) (local.get $at))))))
          (local.set $col (i32.add (local.get $col) (i32.const 4)))
          (br_if $dots (i32.lt_u (local.get $col) (local.get $end))))
        (local.set $dot (f32x4.add (local.get $dot) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $dot) (local.get $dot))))
        (local.set $dot (f32x4.add (local.get $dot) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $dot) (local.get $dot))))
        (local.set $col (i32.const 0))
        (loop $grads
          (local.set $at (i32.shl (local.get $col) (i32.const 2)))
          (v128.store (i32.add (local.get $row) (local.get $at))
            (v128.and (call $causal (local.get $col) (local.get $i))
              (f32x4.mul (f32x4.mul (v128.load (i32.add (local.get $prow) (local.get $at)))
                                    (f32x4.sub (v128.load (i32.add (local.get $row) (local.get $at))) (local.get $dot)))
                         (local.get $s))))
          (local.set $col (i32.add (local.get $col) (i32.const 4)))
          (br_if $grads (i32.lt_u (local.get $col) (local.get $end))))
        (block $zeros_done
          (loop $zeros
            (br_if $zeros_done (i32.ge_u (local.get $col) (local.get $seq)))
            (v128.store (i32.add (local.get $row) (i32.shl (local.get $col) (i32.const 2))) (v128.const i32x4 0 0 0 0))
            (local.set $col (i32.add (local.get $col) (i32.const 4)))
            (br $zeros)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows))))
;; Sum of the 4 lanes.
  (func $hsum (param $v v128) (result f32)
    (local.set $v (f32x4.add (local.get $v) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $v) (local.get $v))))
    (f32x4.extract_lane 0 (f32x4.add (local.get $v) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $v) (local.get $v)))))

  ;; out = a + b for `count` floats (a multiple of 4): the residual connections, in float32 like the
  ;; JavaScript sum of two float32 values rounded to float32.
  (func (export "add") (param $a i32) (param $b i32) (param $out i32) (param $count i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (v128.store (local.get $out) (f32x4.add (v128.load (local.get $a)) (v128.load (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 16)))
        (local.set $b (i32.add (local.get $b) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vectors))))

  ;; y = x / rms(x) · gain for `rows` rows of `cols` floats (a multiple of 4); rstd[r] = 1/rms(row r).
  (func (export "rms_norm_forward") (param $x i32) (param $gain i32) (param $rows i32) (param $cols i32) (param $y i32) (param $rstd i32) (param $eps f32)
    (local $r i32) (local $c i32) (local $bytes i32) (local $sum v128) (local $v v128) (local $inv v128)
    (local.set $bytes (i32.shl (local.get $cols) (i32.const 2)))
    (block $done
      (loop $rows_loop
        (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $sum (v128.const f32x4 0 0 0 0))
        (local.set $c (i32.const 0))
        (loop $squares
          (local.set $v (v128.load (i32.add (local.get $x) (local.get $c))))
          (local.set $sum (f32x4.add (local.get $sum) (f32x4.mul (local.get $v) (local.get $v))))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $squares (i32.lt_u (local.get $c) (local.get $bytes))))
        (local.set $inv (f32x4.splat (f32.div (f32.const 1)
          (f32.sqrt (f32.add (f32.div (call $hsum (local.get $sum)) (f32.convert_i32_u (local.get $cols))) (local.get $eps))))))
        (f32.store (i32.add (local.get $rstd) (i32.shl (local.get $r) (i32.const 2))) (f32x4.extract_lane 0 (local.get $inv)))
        (local.set $c (i32.const 0))
        (loop $scales
          (v128.store (i32.add (local.get $y) (local.get $c))
            (f32x4.mul (f32x4.mul (v128.load (i32.add (local.get $x) (local.get $c))) (local.get $inv)) (v128.load (i32.add (local.get $gain) (local.get $c)))))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $scales (i32.lt_u (local.get $c) (local.get $bytes))))
        (local.set $x (i32.add (local.get $x) (local.get $bytes)))
        (local.set $y (i32.add (local.get $y) (local.get $bytes)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rows_loop))))

  ;; Backward of rms_norm_forward: dx (+)= dy·gain·rstd − x·(Σ dy·gain·x)·rstd³/cols per row, and
  ;; dGain += dy·x·rstd summed over the rows.
  (func (export "rms_norm_backward") (param $x i32) (param $gain i32) (param $rstd i32) (param $dy i32) (param $rows i32) (param $cols i32)
                                     (param $dx i32) (param $dGain i32) (param $accumulate i32)
    (local $r i32) (local $c i32) (local $bytes i32) (local $dot v128) (local $inv v128) (local $coef v128) (local $v v128) (local $g v128)
    (local $at i32) (local $invS f32)
    (local.set $bytes (i32.shl (local.get $cols) (i32.const 2)))
    (block $done
      (loop $rows_loop
        (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $invS (f32.load (i32.add (local.get $rstd) (i32.shl (local.get $r) (i32.const 2)))))
        (local.set $inv (f32x4.splat (local.get $invS)))
        (local.set $dot (v128.const f32x4 0 0 0 0))
        (local.set $c (i32.const 0))
        (loop $dots
          (local.set $v (f32x4.mul (v128.load (i32.add (local.get $dy) (local.get $c))) (v128.load (i32.add (local.get $x) (local.get $c)))))
          (local.set $dot (f32x4.add (local.get $dot) (f32x4.mul (local.get $v) (v128.load (i32.add (local.get $gain) (local.get $c))))))
          (local.set $at (i32.add (local.get $dGain) (local.get $c)))
          (v128.store (local.get $at) (f32x4.add (v128.load (local.get $at)) (f32x4.mul (local.get $v) (local.get $inv))))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $dots (i32.lt_u (local.get $c) (local.get $bytes))))
        (local.set $coef (f32x4.splat (f32.div
          (f32.mul (f32.mul (f32.mul (call $hsum (local.get $dot)) (local.get $invS)) (local.get $invS)) (local.get $invS))
          (f32.convert_i32_u (local.get $cols)))))
        (local.set $c (i32.const 0))
        (loop $grads
          (local.set $g (f32x4.sub
            (f32x4.mul (f32x4.mul (v128.load (i32.add (local.get $dy) (local.get $c))) (v128.load (i32.add (local.get $gain) (local.get $c)))) (local.get $inv))
            (f32x4.mul (v128.load (i32.add (local.get $x) (local.get $c))) (local.get $coef))))
          (local.set $at (i32.add (local.get $dx) (local.get $c)))
          (if (local.get $accumulate) (then (local.set $g (f32x4.add (v128.load (local.get $at)) (local.get $g)))))
          (v128.store (local.get $at) (local.get $g))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $grads (i32.lt_u (local.get $c) (local.get $bytes))))
        (local.set $x (i32.add (local.get $x) (local.get $bytes)))
        (local.set $dy (i32.add (local.get $dy) (local.get $bytes)))
        (local.set $dx (i32.add (local.get $dx) (local.get $bytes)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rows_loop))))

  ;; AdamW on `count` floats (a multiple of 4): g = grad·gradScale; m = β1·m + (1 − β1)·g;
  ;; v = β2·v + (1 − β2)·g²; data −= lr·(m/c1)/(√(v/c2) + eps) + decay·data. data, m and v in place.
  (func (export "adamw") (param $data i32) (param $grad i32) (param $m i32) (param $v i32) (param $count i32)
                         (param $gradScale f32) (param $beta1 f32) (param $beta2 f32) (param $c1 f32) (param $c2 f32)
                         (param $lr f32) (param $eps f32) (param $decay f32)
    (local $end i32) (local $g v128) (local $mv v128) (local $vv v128) (local $d v128)
    (local $scale v128) (local $b1 v128) (local $nb1 v128) (local $b2 v128) (local $nb2 v128)
    (local $cc1 v128) (local $cc2 v128) (local $lrv v128) (local $epsv v128) (local $decv v128)
    (local.set $scale (f32x4.splat (local.get $gradScale)))
    (local.set $b1 (f32x4.splat (local.get $beta1)))
    (local.set $nb1 (f32x4.splat (f32.sub (f32.const 1) (local.get $beta1))))
    (local.set $b2 (f32x4.splat (local.get $beta2)))
    (local.set $nb2 (f32x4.splat (f32.sub (f32.const 1) (local.get $beta2))))
    (local.set $cc1 (f32x4.splat (local.get $c1)))
    (local.set $cc2 (f32x4.splat (local.get $c2)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $epsv (f32x4.splat (local.get $eps)))
    (local.set $decv (f32x4.splat (local.get $decay)))
    (local.set $end (i32.add (local.get $data) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $data) (local.get $end)))
        (local.set $g (f32x4.mul (v128.load (local.get $grad)) (local.get $scale)))
        (local.set $mv (f32x4.add (f32x4.mul (local.get $b1) (v128.load (local.get $m))) (f32x4.mul (local.get $nb1) (local.get $g))))
        (local.set $vv (f32x4.add (f32x4.mul (local.get $b2) (v128.load (local.get $v)))
                                  (f32x4.mul (f32x4.mul (local.get $nb2) (local.get $g)) (local.get $g))))
        (v128.store (local.get $m) (local.get $mv))
        (v128.store (local.get $v) (local.get $vv))
        (local.set $d (v128.load (local.get $data)))
        (v128.store (local.get $data)
          (f32x4.sub
            (f32x4.sub (local.get $d)
              (f32x4.mul (local.get $lrv)
                (f32x4.div (f32x4.div (local.get $mv) (local.get $cc1))
                           (f32x4.add (f32x4.sqrt (f32x4.div (local.get $vv) (local.get $cc2))) (local.get $epsv)))))
            (f32x4.mul (local.get $decv) (local.get $d))))
        (local.set $data (i32.add (local.get $data) (i32.const 16)))
        (local.set $grad (i32.add (local.get $grad) (i32.const 16)))
        (local.set $m (i32.add (local.get $m) (i32.const 16)))
        (local.set $v (i32.add (local.get $v) (i32.const 16)))
        (br $vectors))))

  ;; dst[c·rows + r] = src[r·cols + c] for rows and cols multiples of 4: 4×4 blocks transposed in registers.
  (func (export "transpose") (param $src i32) (param $rows i32) (param $cols i32) (param $dst i32)
    (local $r i32) (local $c i32) (local $at i32) (local $to i32) (local $rowBytes i32) (local $colBytes i32)
    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
    (local.set $rowBytes (i32.shl (local.get $cols) (i32.const 2)))
    (local.set $colBytes (i32.shl (local.get $rows) (i32.const 2)))
    (block $rows_done
      (loop $rows_loop
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $c (i32.const 0))
        (loop $cols_loop
          (local.set $at (i32.add (local.get $src) (i32.shl (i32.add (i32.mul (local.get $r) (local.get $cols)) (local.get $c)) (i32.const 2))))
          (local.set $r0 (v128.load (local.get $at)))
          (local.set $r1 (v128.load (i32.add (local.get $at) (local.get $rowBytes))))
          (local.set $r2 (v128.load (i32.add (local.get $at) (i32.shl (local.get $rowBytes) (i32.const 1)))))
          (local.set $r3 (v128.load (i32.add (local.get $at) (i32.mul (local.get $rowBytes) (i32.const 3)))))
          (local.set $t0 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $r0) (local.get $r1)))
          (local.set $t1 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $r0) (local.get $r1)))
          (local.set $t2 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $r2) (local.get $r3)))
          (local.set $t3 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $r2) (local.get $r3)))
          (local.set $to (i32.add (local.get $dst) (i32.shl (i32.add (i32.mul (local.get $c) (local.get $rows)) (local.get $r)) (i32.const 2))))
          (v128.store (local.get $to) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t2)))
          (v128.store (i32.add (local.get $to) (local.get $colBytes)) (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t2)))
          (v128.store (i32.add (local.get $to) (i32.shl (local.get $colBytes) (i32.const 1))) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t1) (local.get $t3)))
          (v128.store (i32.add (local.get $to) (i32.mul (local.get $colBytes) (i32.const 3))) (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t1) (local.get $t3)))
          (local.set $c (i32.add (local.get $c) (i32.const 4)))
          (br_if $cols_loop (i32.lt_u (local.get $c) (local.get $cols))))
        (local.set $r (i32.add (local.get $r) (i32.const 4)))
        (br $rows_loop))))

  ;; ---- float64 exp, bit for bit V8's Math.exp (fdlibm's e_exp.c as in V8's src/base/ieee754.cc), so
  ;; the cross-entropy below gives the same bits as the JavaScript loop it replaces. ----

  ;; Every case of fdlibm's exp (non-finite, overflow, underflow, |x| < 2^-28, exp(1)).
  (func $exp64 (param $x f64) (result f64)
    (local $hx i32) (local $xsb i32) (local $k i32) (local $hi f64) (local $lo f64) (local $t f64) (local $c f64) (local $y f64)
    (local.set $hx (i32.wrap_i64 (i64.shr_u (i64.reinterpret_f64 (local.get $x)) (i64.const 32))))
    (local.set $xsb (i32.shr_u (local.get $hx) (i32.const 31)))
    (local.set $hx (i32.and (local.get $hx) (i32.const 0x7fffffff)))
    (if (i32.ge_u (local.get $hx) (i32.const 0x40862E42))
      (then
        (if (i32.ge_u (local.get $hx) (i32.const 0x7FF00000))
          (then
            (if (f64.ne (local.get $x) (local.get $x)) (then (return (f64.add (local.get $x) (local.get $x)))))
            (return (select (local.get $x) (f64.const 0) (i32.eqz (local.get $xsb))))))
        (if (f64.gt (local.get $x) (f64.const 7.09782712893383973096e+02)) (then (return (f64.const inf))))
        (if (f64.lt (local.get $x) (f64.const -7.45133219101941108420e+02)) (then (return (f64.const 0))))))
    (if (i32.gt_u (local.get $hx) (i32.const 0x3FD62E42))
      (then
        (if (i32.lt_u (local.get $hx) (i32.const 0x3FF0A2B2))
          (then
            (if (f64.eq (local.get $x) (f64.const 1)) (then (return (f64.const 2.718281828459045))))
            (local.set $hi (f64.sub (local.get $x)
              (select (f64.const -6.93147180369123816490e-01) (f64.const 6.93147180369123816490e-01) (local.get $xsb))))
            (local.set $lo (select (f64.const -1.90821492927058770002e-10) (f64.const 1.90821492927058770002e-10) (local.get $xsb)))
            (local.set $k (i32.sub (i32.const 1) (i32.shl (local.get $xsb) (i32.const 1)))))
          (else
            (local.set $k (i32.trunc_f64_s (f64.add (f64.mul (f64.const 1.44269504088896338700e+00) (local.get $x))
              (select (f64.const -0.5) (f64.const 0.5) (local.get $xsb)))))
            (local.set $t (f64.convert_i32_s (local.get $k)))
            (local.set $hi (f64.sub (local.get $x) (f64.mul (local.get $t) (f64.const 6.93147180369123816490e-01))))
            (local.set $lo (f64.mul (local.get $t) (f64.const 1.90821492927058770002e-10)))))
        (local.set $x (f64.sub (local.get $hi) (local.get $lo))))
      (else
        (if (i32.lt_u (local.get $hx) (i32.const 0x3E300000)) (then (return (f64.add (f64.const 1) (local.get $x)))))))
    (local.set $t (f64.mul (local.get $x) (local.get $x)))
    (local.set $c (f64.sub (local.get $x) (f64.mul (local.get $t)
      (f64.add (f64.const 1.66666666666666019037e-01) (f64.mul (local.get $t)
      (f64.add (f64.const -2.77777777770155933842e-03) (f64.mul (local.get $t)
      (f64.add (f64.const 6.61375632143793436117e-05) (f64.mul (local.get $t)
      (f64.add (f64.const -1.65339022054652515390e-06) (f64.mul (local.get $t) (f64.const 4.13813679705723846039e-08))))))))))))
    (if (i32.eqz (local.get $k))
      (then (return (f64.sub (f64.const 1)
        (f64.sub (f64.div (f64.mul (local.get $x) (local.get $c)) (f64.sub (local.get $c) (f64.const 2))) (local.get $x))))))
    (local.set $y (f64.sub (f64.const 1)
      (f64.sub (f64.sub (local.get $lo) (f64.div (f64.mul (local.get $x) (local.get $c)) (f64.sub (f64.const 2) (local.get $c)))) (local.get $hi))))
    (if (i32.ge_s (local.get $k) (i32.const -1021))
      (then
        (if (i32.eq (local.get $k) (i32.const 1024)) (then (return (f64.mul (f64.mul (local.get $y) (f64.const 2)) (f64.const 8.988465674311579539e307)))))
        (return (f64.mul (local.get $y) (call $pow2 (local.get $k))))))
    (f64.mul (f64.mul (local.get $y) (call $pow2 (i32.add (local.get $k) (i32.const 1000)))) (f64.const 9.33263618503218878990e-302)))

  ;; 2^k for a normal result (k ∈ [−1022, 1023]).
  (func $pow2 (param $k i32) (result f64)
    (f64.reinterpret_i64 (i64.shl (i64.extend_i32_u (i32.add (local.get $k) (i32.const 1023))) (i64.const 52))))

  ;; $exp64 in place on `count` doubles (an even count), two lanes at a time where both have
  ;; 2^-28 ≤ |x| < 512: the same operations lane by lane with the branches as selects, inline (no
  ;; calls on the hot path). (x·c)/(c − 2) of the k = 0 case is −(x·c)/(2 − c) exactly, so one
  ;; division serves both cases. Other pairs (zeros, NaN, huge) go through $exp64 lane by lane.
  (func $exp64_in_place (param $at i32) (param $count i32)
    (local $end i32) (local $x v128)
    (local $hx v128) (local $neg v128) (local $reduce v128) (local $t v128) (local $hi v128) (local $lo v128)
    (local $r v128) (local $tt v128) (local $c v128) (local $q v128) (local $small v128) (local $scaled v128)
    (local.set $end (i32.add (local.get $at) (i32.shl (local.get $count) (i32.const 3))))
    (block $done
      (loop $pairs
        (br_if $done (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $x (v128.load (local.get $at)))
        (local.set $hx (v128.and (i64x2.shr_u (local.get $x) (i32.const 32)) (v128.const i64x2 0x7fffffff 0x7fffffff)))
        (if (v128.any_true (v128.or
              (i64x2.lt_s (local.get $hx) (v128.const i64x2 0x3E300000 0x3E300000))
              (i64x2.ge_s (local.get $hx) (v128.const i64x2 0x40800000 0x40800000))))
          (then (v128.store (local.get $at) (f64x2.replace_lane 1
            (f64x2.splat (call $exp64 (f64x2.extract_lane 0 (local.get $x))))
            (call $exp64 (f64x2.extract_lane 1 (local.get $x))))))
          (else
            (local.set $neg (f64x2.lt (local.get $x) (v128.const f64x2 0 0)))
            (local.set $reduce (i64x2.gt_s (local.get $hx) (v128.const i64x2 0x3FD62E42 0x3FD62E42)))
            ;; k: ±1 below 1.5·ln 2, else (int)(x/ln 2 ± 1/2); 0 where no reduction is needed.
            (local.set $t (v128.bitselect
              (v128.bitselect (v128.const f64x2 -1 -1) (v128.const f64x2 1 1) (local.get $neg))
              (f64x2.trunc (f64x2.add (f64x2.mul (v128.const f64x2 1.44269504088896338700e+00 1.44269504088896338700e+00) (local.get $x))
                (v128.bitselect (v128.const f64x2 -0.5 -0.5) (v128.const f64x2 0.5 0.5) (local.get $neg))))
              (i64x2.lt_s (local.get $hx) (v128.const i64x2 0x3FF0A2B2 0x3FF0A2B2))))
            (local.set $t (v128.and (local.get $t) (local.get $reduce)))
            (local.set $hi (f64x2.sub (local.get $x) (f64x2.mul (local.get $t) (v128.const f64x2 6.93147180369123816490e-01 6.93147180369123816490e-01))))
            (local.set $lo (f64x2.mul (local.get $t) (v128.const f64x2 1.90821492927058770002e-10 1.90821492927058770002e-10)))
            (local.set $r (f64x2.sub (local.get $hi) (local.get $lo)))
            (local.set $tt (f64x2.mul (local.get $r) (local.get $r)))
            (local.set $c (f64x2.sub (local.get $r) (f64x2.mul (local.get $tt)
              (f64x2.add (v128.const f64x2 1.66666666666666019037e-01 1.66666666666666019037e-01) (f64x2.mul (local.get $tt)
              (f64x2.add (v128.const f64x2 -2.77777777770155933842e-03 -2.77777777770155933842e-03) (f64x2.mul (local.get $tt)
              (f64x2.add (v128.const f64x2 6.61375632143793436117e-05 6.61375632143793436117e-05) (f64x2.mul (local.get $tt)
              (f64x2.add (v128.const f64x2 -1.65339022054652515390e-06 -1.65339022054652515390e-06)
                (f64x2.mul (local.get $tt) (v128.const f64x2 4.13813679705723846039e-08 4.13813679705723846039e-08))))))))))))
            (local.set $q (f64x2.div (f64x2.mul (local.get $r) (local.get $c)) (f64x2.sub (v128.const f64x2 2 2) (local.get $c))))
            (local.set $small (f64x2.sub (v128.const f64x2 1 1) (f64x2.sub (f64x2.neg (local.get $q)) (local.get $r))))
            ;; (1 − ((lo − q) − hi))·2^k, 2^k from k's bits (|k| ≤ 739 here).
            (local.set $scaled (f64x2.mul
              (f64x2.sub (v128.const f64x2 1 1) (f64x2.sub (f64x2.sub (local.get $lo) (local.get $q)) (local.get $hi)))
              (i64x2.shl (i64x2.add (i64x2.extend_low_i32x4_s (i32x4.trunc_sat_f64x2_s_zero (local.get $t))) (v128.const i64x2 1023 1023)) (i32.const 52))))
            (v128.store (local.get $at) (v128.bitselect (v128.const f64x2 2.718281828459045 2.718281828459045)
              (v128.bitselect (local.get $scaled) (local.get $small) (local.get $reduce))
              (f64x2.eq (local.get $x) (v128.const f64x2 1 1))))))
        (local.set $at (i32.add (local.get $at) (i32.const 16)))
        (br $pairs))))

  ;; The exponentials of the cross-entropy, per row of `vocab` logits (a multiple of 4), in float64 like
  ;; the JavaScript loop: max = the row's largest logit, e = exp(logit − max), sum = Σ e in column
  ;; order; stats receives (max, sum) per row. With `withGrad`, probs receives e rounded to float32, then
  ;; that times 1/(sum·totalRows): ∂(mean loss)/∂logits before the target's −1/totalRows. `scratch`
  ;; holds one row of doubles.
  (func (export "softmax_rows") (param $logits i32) (param $rows i32) (param $vocab i32) (param $probs i32) (param $stats i32)
                                (param $totalRows f64) (param $withGrad i32) (param $scratch i32)
    (local $r i32) (local $c i32) (local $bytes i32) (local $maxv v128) (local $max f64) (local $m v128)
    (local $e v128) (local $sum f64) (local $scale v128)
    (local.set $bytes (i32.shl (local.get $vocab) (i32.const 2)))
    (block $done
      (loop $rows_loop
        (br_if $done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $maxv (v128.const f32x4 -inf -inf -inf -inf))
        (local.set $c (i32.const 0))
        (loop $maxes
          (local.set $maxv (f32x4.max (local.get $maxv) (v128.load (i32.add (local.get $logits) (local.get $c)))))
          (local.set $c (i32.add (local.get $c) (i32.const 16)))
          (br_if $maxes (i32.lt_u (local.get $c) (local.get $bytes))))
        (local.set $maxv (f32x4.max (local.get $maxv) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $maxv) (local.get $maxv))))
        (local.set $maxv (f32x4.max (local.get $maxv) (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $maxv) (local.get $maxv))))
        (local.set $max (f64.promote_f32 (f32x4.extract_lane 0 (local.get $maxv))))
        (local.set $m (f64x2.splat (local.get $max)))
        (local.set $c (i32.const 0))
        (loop $differences
          (v128.store (i32.add (local.get $scratch) (i32.shl (local.get $c) (i32.const 1)))
            (f64x2.sub (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $logits) (local.get $c)))) (local.get $m)))
          (local.set $c (i32.add (local.get $c) (i32.const 8)))
          (br_if $differences (i32.lt_u (local.get $c) (local.get $bytes))))
        (call $exp64_in_place (local.get $scratch) (local.get $vocab))
        (local.set $sum (f64.const 0))
        (local.set $c (i32.const 0))
        (loop $sums
          (local.set $e (v128.load (i32.add (local.get $scratch) (i32.shl (local.get $c) (i32.const 1)))))
          (if (local.get $withGrad)
            (then (v128.store64_lane 0 (i32.add (local.get $probs) (local.get $c)) (f32x4.demote_f64x2_zero (local.get $e)))))
          (local.set $sum (f64.add (f64.add (local.get $sum) (f64x2.extract_lane 0 (local.get $e))) (f64x2.extract_lane 1 (local.get $e))))
          (local.set $c (i32.add (local.get $c) (i32.const 8)))
          (br_if $sums (i32.lt_u (local.get $c) (local.get $bytes))))
        (f64.store (local.get $stats) (local.get $max))
        (f64.store offset=8 (local.get $stats) (local.get $sum))
        (if (local.get $withGrad)
          (then
            (local.set $scale (f64x2.splat (f64.div (f64.const 1) (f64.mul (local.get $sum) (local.get $totalRows)))))
            (local.set $c (i32.const 0))
            (loop $scales
              (v128.store64_lane 0 (i32.add (local.get $probs) (local.get $c))
                (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $probs) (local.get $c)))) (local.get $scale))))
              (local.set $c (i32.add (local.get $c) (i32.const 8)))
              (br_if $scales (i32.lt_u (local.get $c) (local.get $bytes))))))
        (local.set $logits (i32.add (local.get $logits) (local.get $bytes)))
        (local.set $probs (i32.add (local.get $probs) (local.get $bytes)))
        (local.set $stats (i32.add (local.get $stats) (i32.const 16)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rows_loop))))

  ;; One batch element of attention's head split / merge with RoPE (src/trainer/attention.ts), in float64
  ;; like the JavaScript loop so the bits are the same: for each head h and position s, the pairs
  ;; (x1, x2) = (x[i], x[i + half]) become (x1·c − x2·sn, x1·sn + x2·c) with c = cos[s][i] and
  ;; sn = rope·sin[s][i], or c = 1, sn = 0 when rope is 0. `split`: src is [seqLen, heads·headDim] and
  ;; dst [heads, seqLen, headDim]; otherwise the other way round. headDim is a multiple of 4.
  (func (export "rope_permute") (param $src i32) (param $dst i32) (param $cos i32) (param $sin i32)
                                (param $seqLen i32) (param $heads i32) (param $headDim i32) (param $rope f64) (param $split i32)
    (local $h i32) (local $s i32) (local $i i32) (local $half i32) (local $token i32) (local $head i32) (local $from i32) (local $to i32)
    (local $angle i32) (local $x1 v128) (local $x2 v128) (local $c v128) (local $sn v128)
    (local.set $half (i32.shl (i32.shr_u (local.get $headDim) (i32.const 1)) (i32.const 2)))
    (local.set $c (v128.const f64x2 1 1))
    (local.set $sn (v128.const f64x2 0 0))
    (block $heads_done
      (loop $heads_loop
        (br_if $heads_done (i32.ge_u (local.get $h) (local.get $heads)))
        (local.set $s (i32.const 0))
        (block $positions_done
          (loop $positions
            (br_if $positions_done (i32.ge_u (local.get $s) (local.get $seqLen)))
            (local.set $token (i32.shl (i32.add (i32.mul (i32.mul (local.get $s) (local.get $heads)) (local.get $headDim))
                                                (i32.mul (local.get $h) (local.get $headDim))) (i32.const 2)))
            (local.set $head (i32.shl (i32.mul (i32.add (i32.mul (local.get $h) (local.get $seqLen)) (local.get $s)) (local.get $headDim)) (i32.const 2)))
            (local.set $from (i32.add (local.get $src) (select (local.get $token) (local.get $head) (local.get $split))))
            (local.set $to (i32.add (local.get $dst) (select (local.get $head) (local.get $token) (local.get $split))))
            (local.set $angle (i32.mul (local.get $s) (local.get $half)))
            (local.set $i (i32.const 0))
            (loop $pairs
              (local.set $x1 (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $from) (local.get $i)))))
              (local.set $x2 (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (i32.add (local.get $from) (local.get $half)) (local.get $i)))))
              (if (f64.ne (local.get $rope) (f64.const 0))
                (then
                  (local.set $c (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $cos) (i32.add (local.get $angle) (local.get $i))))))
                  (local.set $sn (f64x2.mul (f64x2.splat (local.get $rope))
                    (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $sin) (i32.add (local.get $angle) (local.get $i)))))))))
              (v128.store64_lane 0 (i32.add (local.get $to) (local.get $i))
                (f32x4.demote_f64x2_zero (f64x2.sub (f64x2.mul (local.get $x1) (local.get $c)) (f64x2.mul (local.get $x2) (local.get $sn)))))
              (v128.store64_lane 0 (i32.add (i32.add (local.get $to) (local.get $half)) (local.get $i))
                (f32x4.demote_f64x2_zero (f64x2.add (f64x2.mul (local.get $x1) (local.get $sn)) (f64x2.mul (local.get $x2) (local.get $c)))))
              (local.set $i (i32.add (local.get $i) (i32.const 8)))
              (br_if $pairs (i32.lt_u (local.get $i) (local.get $half))))
            (local.set $s (i32.add (local.get $s) (i32.const 1)))
            (br $positions)))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $heads_loop))))

  ;; $exp64_in_place for the tests, which hold it to Math.exp bit for bit.
  (func (export "exp64") (param $at i32) (param $count i32)
    (call $exp64_in_place (local.get $at) (local.get $count)))
)
