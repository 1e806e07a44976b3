#version 450
// The whole workgroup per row: see matvec.glsl.
#define MATVEC_WIDE 1
#include "matvec.glsl"
