#version 450
// A subgroup per row: see matvec.glsl.
#include "matvec.glsl"
