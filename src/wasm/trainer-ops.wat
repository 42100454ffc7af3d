;; The emulation trainer's element-wise and row-wise kernels, in float32 SIMD: SwiGLU and the causal
;; softmax of attention (both dominated by exp in plain JavaScript) and RMSNorm, forward and backward.
;; exp is Cephes' expf (range reduction by ln 2 in two parts, degree-6 polynomial; within 2 ulp of
;; the exact value over its range) written with mul then add (no FMA), so results do not depend on
;; the host CPU. Arguments are clamped to [−87, 88] so 2^n stays a normal float; NaN propagates.
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

  ;; out = silu(gate)·up for `count` floats (a multiple of 4).
  (func (export "swiglu_forward") (param $gate i32) (param $up i32) (param $out i32) (param $count i32)
    (local $end i32) (local $a v128)
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $a (v128.load (local.get $gate)))
        (v128.store (local.get $out)
          (f32x4.mul (f32x4.mul (local.get $a) (call $sigmoid (local.get $a))) (v128.load (local.get $up))))
        (local.set $gate (i32.add (local.get $gate) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $vectors))))

  ;; dUp = dOut·silu(gate); dGate = dOut·up·s·(1 + gate·(1 − s)) with s = sigmoid(gate). dUp and
  ;; dGate overwrite up and gate in place.
  (func (export "swiglu_backward") (param $gate i32) (param $up i32) (param $dOut i32) (param $count i32)
    (local $end i32) (local $a v128) (local $s v128) (local $d v128)
    (local.set $end (i32.add (local.get $dOut) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $vectors
        (br_if $done (i32.ge_u (local.get $dOut) (local.get $end)))
        (local.set $a (v128.load (local.get $gate)))
        (local.set $s (call $sigmoid (local.get $a)))
        (local.set $d (v128.load (local.get $dOut)))
        (v128.store (local.get $gate)
          (f32x4.mul (f32x4.mul (f32x4.mul (local.get $d) (v128.load (local.get $up))) (local.get $s))
            (f32x4.add (v128.const f32x4 1 1 1 1)
              (f32x4.mul (local.get $a) (f32x4.sub (v128.const f32x4 1 1 1 1) (local.get $s))))))
        (v128.store (local.get $up) (f32x4.mul (local.get $d) (f32x4.mul (local.get $a) (local.get $s))))
        (local.set $gate (i32.add (local.get $gate) (i32.const 16)))
        (local.set $up (i32.add (local.get $up) (i32.const 16)))
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
)
