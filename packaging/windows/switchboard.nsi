; Switchboard's Windows installer: per user (no administrator rights),
; into %LOCALAPPDATA%\Programs\Switchboard, with a Start-menu entry and an
; uninstaller registered in Apps & features (HKCU). `make package-windows`
; builds it with Debian's makensis:
;
;   makensis -DVERSION=0.1.0 -DSRC=dist/windows -DOUT=dist/switchboard-0.1.0-setup.exe switchboard.nsi
;
; Silent use: setup.exe /S [/D=C:\path]; uninstall.exe /S. Both exit 2
; when a program file could not be replaced or removed (the uninstaller
; copies itself to %TEMP% and returns at once: `uninstall.exe /S
; _?=INSTDIR` runs in place and waits, and leaves uninstall.exe behind).
;
; A running program cannot be overwritten or deleted, but it can be
; renamed: setup moves what runs (the pool, a client's
; switchboard-connect.exe) aside into replaced\, and the pool upgrades
; itself to the new switchboard.exe (it follows installs). What is there
; goes at the next install or uninstall, once it has exited. The
; uninstaller asks the pool to quit first, and stops, saying why, while a
; program file is still in use.

; The app is 64-bit only, and so is the installer (it also runs under a
; 64-bit-only Wine).
Target amd64-unicode
SetCompressor /SOLID lzma
RequestExecutionLevel user

!include LogicLib.nsh

!ifndef VERSION
  !error "VERSION is not defined (-DVERSION=...)"
!endif
!ifndef SRC
  !error "SRC is not defined (-DSRC=directory with the .exe files)"
!endif
!ifndef OUT
  !define OUT "switchboard-${VERSION}-setup.exe"
!endif

!define UNINSTKEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Switchboard"
!define RUNKEY "Software\Microsoft\Windows\CurrentVersion\Run"

Name "Switchboard ${VERSION}"
OutFile "${OUT}"
InstallDir "$LOCALAPPDATA\Programs\Switchboard"
InstallDirRegKey HKCU "${UNINSTKEY}" "InstallLocation"
Icon "${SRC}\switchboard.ico"
UninstallIcon "${SRC}\switchboard.ico"
VIProductVersion "${VERSION}.0"
VIAddVersionKey "ProductName" "Switchboard"
VIAddVersionKey "FileDescription" "Switchboard installer"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "LegalCopyright" "Copyright (c) 2026 The Switchboard authors. MIT License."

Page license
Page directory
Page instfiles
UninstPage uninstConfirm
UninstPage instfiles
LicenseData "${SRC}\LICENSE.txt"

; Why the install or uninstall cannot go on, or "".
Var Failed

Section "Switchboard"
  SetShellVarContext current
  SetOutPath "$INSTDIR"
  RMDir /r "$INSTDIR\replaced" ; what earlier upgrades moved aside and no longer runs
retry:
  StrCpy $Failed ""
  ClearErrors
  File /oname=switchboard.exe.new "${SRC}\switchboard.exe"
  File /oname=switchboard-connect.exe.new "${SRC}\switchboard-connect.exe"
  File "${SRC}\LICENSE.txt"
  ${If} ${Errors}
    StrCpy $Failed "Could not write the program files into $INSTDIR."
  ${Else}
    StrCpy $R0 "switchboard-connect.exe"
    Call PutInPlace
  ${EndIf}
  ${If} $Failed == ""
    StrCpy $R0 "switchboard.exe"
    Call PutInPlace
  ${EndIf}
  ${If} $Failed == ""
    ClearErrors
    WriteUninstaller "$INSTDIR\uninstall.exe"
    ${If} ${Errors}
      StrCpy $Failed "Could not write $INSTDIR\uninstall.exe."
    ${EndIf}
  ${EndIf}
  ${If} $Failed != ""
    MessageBox MB_RETRYCANCEL|MB_ICONSTOP "$Failed" /SD IDCANCEL IDRETRY retry
    Delete "$INSTDIR\switchboard.exe.new"
    Delete "$INSTDIR\switchboard-connect.exe.new"
    SetErrorLevel 2
    Abort "$Failed"
  ${EndIf}
  CreateShortcut "$SMPROGRAMS\Switchboard.lnk" "$INSTDIR\switchboard.exe" "" "$INSTDIR\switchboard.exe" 0
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayName" "Switchboard"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTKEY}" "Publisher" "The Switchboard authors"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayIcon" "$INSTDIR\switchboard.exe"
  WriteRegStr HKCU "${UNINSTKEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTKEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINSTKEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoRepair" 1
SectionEnd

; PutInPlace puts $INSTDIR\$R0.new in the place of $INSTDIR\$R0. The file
; there goes, or when it runs, and so cannot, moves aside into replaced\
; (a running Switchboard then upgrades itself to the new one). $Failed
; says why not.
Function PutInPlace
  StrCpy $R1 ""
  ${If} ${FileExists} "$INSTDIR\$R0"
    ClearErrors
    Delete "$INSTDIR\$R0"
    ${If} ${Errors}
      CreateDirectory "$INSTDIR\replaced"
      GetTempFileName $R1 "$INSTDIR\replaced"
      Delete $R1
      ClearErrors
      Rename "$INSTDIR\$R0" $R1
      ${If} ${Errors}
        StrCpy $Failed "$INSTDIR\$R0 is in use and cannot be replaced. Quit Switchboard (its tray icon's Quit) and close your AI clients, then try again."
        Return
      ${EndIf}
    ${EndIf}
  ${EndIf}
  ClearErrors
  Rename "$INSTDIR\$R0.new" "$INSTDIR\$R0"
  ${If} ${Errors}
    StrCpy $Failed "Could not put the new $R0 in place in $INSTDIR."
    ${If} $R1 != ""
      Rename $R1 "$INSTDIR\$R0"
    ${EndIf}
  ${EndIf}
FunctionEnd

Section "Uninstall"
  SetShellVarContext current
retry:
  StrCpy $Failed ""
  ; A running Switchboard holds its program: it quits first, as on its
  ; tray's Quit (its clients' sessions wait for a pool, and end at their
  ; next request, finding none).
  StrCpy $1 ""
  ${If} ${FileExists} "$INSTDIR\switchboard.exe"
    nsExec::ExecToStack '"$INSTDIR\switchboard.exe" quit'
    Pop $0
    Pop $1
  ${EndIf}
  ; switchboard.exe last: while a client's session runs, the install
  ; stays whole.
  ClearErrors
  Delete "$INSTDIR\switchboard-connect.exe"
  ${If} ${Errors}
    StrCpy $Failed "An AI client's session still runs $INSTDIR\switchboard-connect.exe. Close your AI clients (Claude Desktop, Cursor, VS Code, ...), then try again."
  ${ElseIf} ${FileExists} "$INSTDIR\replaced\*.*"
    RMDir /r "$INSTDIR\replaced"
    ${If} ${Errors}
      StrCpy $Failed "A program an upgrade replaced still runs from $INSTDIR\replaced: an AI client's session older than the upgrade, or a Switchboard of another SWITCHBOARD_HOME. Close your AI clients and quit Switchboard (its tray icon's Quit), then try again."
    ${EndIf}
  ${EndIf}
  ${If} $Failed == ""
    Delete "$INSTDIR\switchboard.exe"
    ${If} ${Errors}
      StrCpy $Failed "Switchboard is still running from $INSTDIR (one of another SWITCHBOARD_HOME, or one a client started again). Quit it (its tray icon's Quit), then try again.$\r$\n$\r$\nswitchboard quit said: $1"
    ${EndIf}
  ${EndIf}
  ${If} $Failed != ""
    MessageBox MB_RETRYCANCEL|MB_ICONSTOP "$Failed" /SD IDCANCEL IDRETRY retry
    ; The entry in Apps & features stays, to try again.
    SetErrorLevel 2
    Abort "$Failed"
  ${EndIf}
  ; Start at login points at the binary that is gone.
  DeleteRegValue HKCU "${RUNKEY}" "Switchboard"
  Delete "$SMPROGRAMS\Switchboard.lnk"
  Delete "$INSTDIR\LICENSE.txt"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
  DeleteRegKey HKCU "${UNINSTKEY}"
  ; The user's config (%APPDATA%\switchboard) and history
  ; (%LOCALAPPDATA%\switchboard) are theirs.
SectionEnd
